//go:build platforms

package platformtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/sessionbench"
)

// benchEnv asks TestSessionStartBench for N new sessions per profile;
// clientEnv makes the test binary the benchmark's client.
const (
	benchEnv  = "GLOVEBOX_PLATFORM_BENCH"
	clientEnv = "GLOVEBOX_PLATFORM_BENCH_CLIENT"
)

// TestSessionStartBench measures, under each profile, the time from
// dialling a new session to the first event of `echo hi`, beside the
// fork/exec floor (/bin/sh -c 'echo hi' to its output), with
// internal/sessionbench and as kit/internal/kitbench measures them: the
// client in a process of its own (this test binary, re-executed), the
// kit in another. It runs only with GLOVEBOX_PLATFORM_BENCH=N (sessions
// per profile) and prints a table for BENCHMARKS.md:
//
//	sudo GLOVEBOX_PLATFORM_BENCH=200 go test -tags platforms -count=1 -run TestSessionStartBench -v ./internal/platformtest
func TestSessionStartBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(benchEnv))
	if n <= 0 {
		t.Skipf("set %s=N to time N new sessions per profile", benchEnv)
	}
	runc := requirePlatform(t)
	bins := buildBins(t)
	var rows []string
	for _, p := range profiles() {
		if p.refuse != "" {
			continue // the rows that take a layer away
		}
		ok := t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			k := startKit(t, runc, bins, p, true)
			if err := k.waitServing(ctx); err != nil {
				t.Fatalf("the kit does not serve: %v\n%s", err, k.log())
			}
			iso, err := isolation(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			var got struct{ Floor, First []time.Duration }
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBenchClient$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=ws://%s/ %s %d", clientEnv, k.base(), k.key, n))
			out, err := cmd.Output()
			if err != nil {
				// A profile whose prompts fail has no figure; the
				// matrix says why.
				rows = append(rows, fmt.Sprintf("| %s | prompts fail | | | %s |", p.name, strings.Join(iso.Active, ", ")))
				t.Logf("bench client: %v\n%s", err, out)
				return
			}
			line := lineWith(string(out), "{")
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("bench client said %q: %v", out, err)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", p.name, median(got.First), p90(got.First), median(got.Floor), strings.Join(iso.Active, ", ")))
		})
		if !ok {
			return
		}
	}
	t.Logf("\n| profile | new session to first event of echo hi, median | p90 | fork/exec floor, median | layers in force |\n|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// TestBenchClient is the benchmark's client process: it times the floor
// and then N new sessions, and prints both as one JSON line.
func TestBenchClient(t *testing.T) {
	spec := os.Getenv(clientEnv)
	if spec == "" {
		t.Skip("the client of TestSessionStartBench, run by it")
	}
	f := strings.Fields(spec)
	url, key := f[0], f[1]
	n, _ := strconv.Atoi(f[2])
	var res struct{ Floor, First []time.Duration }
	for range n {
		d, err := sessionbench.Floor()
		if err != nil {
			t.Fatal(err)
		}
		res.Floor = append(res.Floor, d)
	}
	for i := range n {
		d, err := sessionbench.FirstEvent(t.Context(), url, key)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		res.First = append(res.First, d)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("%s\n", b)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func median(ds []time.Duration) string {
	return quantile(ds, 0.5).Round(10 * time.Microsecond).String()
}

func p90(ds []time.Duration) string { return quantile(ds, 0.9).Round(10 * time.Microsecond).String() }
