package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// TestMain lets the tests re-execute the test binary in kitbench's roles,
// as kitbench re-executes itself.
func TestMain(m *testing.M) {
	sandbox.MaybeSupervise() // the test binary serves as its sessions' supervisor
	if ok, err := role(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "kitbench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testkit.Main(m)
}

// TestServedRowsAndTable runs the cross-process measures briefly: a kit
// with a Go agent in the serve role, in its own process; round trips and
// bursts against it; the minimal HTTP server's start; and prints the
// table.
func TestServedRowsAndTable(t *testing.T) {
	before := runtime.NumGoroutine()
	defer testkit.Goroutines(t, before)
	rows, err := measure(config{starts: 0, bursts: []int{100, 1000}, burstRuns: 2, roundTrips: 20}, "")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var fs []time.Duration
	for range 2 {
		d, err := startFloor(self)
		if err != nil {
			t.Fatalf("the http role's start: %v", err)
		}
		fs = append(fs, d)
	}
	rows = append(rows, startRow("minimal Go HTTP server start to /health", fs, "the floor"))

	want := []string{
		"ping to pong, one connection",
		"prompt round trip, no-op Go agent, same connection",
		"prompt round trip / ping",
		"server CPU per 1,000 prompts (user+system)",
		"events/s to one client, burst of 100",
		"events/s to one client, burst of 100, a session's second prompt",
		"events/s to one client, burst of 1000",
		"minimal Go HTTP server start to /health",
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(rows), len(want), rows)
	}
	var out bytes.Buffer
	if err := printTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want)+1 || !strings.HasPrefix(lines[0], "measure") {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, w := range want {
		r := rows[i]
		if r.measure != w || r.median == "" || r.spread == "" || r.runs == 0 || !strings.HasPrefix(lines[i+1], w) {
			t.Errorf("row %d: %+v, line %q; want measure %q with a median, a spread and runs", i, r, lines[i+1], w)
		}
	}
	t.Log("\n" + out.String())
}

// TestOriginalRows runs the round trips against the kit's serve role and
// the original's stand-in (Node and ws, client/typescript's v1 box)
// alternately, and checks the stand-in answered and the ratio rows are
// made. It needs node and npm ci in client/typescript.
func TestOriginalRows(t *testing.T) {
	v1 := v1Server()
	if v1 == "" {
		t.Skip("no node, or no client/typescript/node_modules (npm ci there)")
	}
	before := runtime.NumGoroutine()
	defer testkit.Goroutines(t, before)
	s, err := startServed()
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	orig, err := startOriginal(v1)
	if err != nil {
		t.Fatal(err)
	}
	defer orig.stop()
	rows, err := roundTrips(s, orig, 20)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ping to pong, one connection",
		"prompt round trip, no-op Go agent, same connection",
		"prompt round trip / ping",
		"server CPU per 1,000 prompts (user+system)",
		"ping to pong, the original's stand-in (Node, ws)",
		"prompt round trip, the original's stand-in",
		"server CPU per 1,000 prompts, the original's stand-in",
		"ping, kit / original",
		"prompt round trip, kit / original",
		"server CPU per 1,000 prompts, kit / original",
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		if r := rows[i]; r.measure != w || r.median == "" || r.runs != 20 {
			t.Errorf("row %d: %+v; want measure %q with a median over 20 runs", i, r, w)
		}
	}
}

// TestServedStops checks that the serve role's process ends when its
// client closes its standard input, and answers until then.
func TestServedStops(t *testing.T) {
	s, err := startServed()
	if err != nil {
		t.Fatal(err)
	}
	r, err := events(s, 10, 1, true)
	if err != nil {
		s.stop()
		t.Fatal(err)
	}
	if r.runs != 1 || r.median == "" {
		t.Errorf("row %+v; want one run with a rate", r)
	}
	s.stop()
	if s.cmd.ProcessState == nil || !s.cmd.ProcessState.Exited() || !s.cmd.ProcessState.Success() {
		t.Errorf("the serve role's process: %v; want it exited cleanly once its standard input closed", s.cmd.ProcessState)
	}
}

// TestQuickConfig checks that --quick leaves out nothing but --first and
// --sandboxes, and that count lists are parsed strictly.
func TestQuickConfig(t *testing.T) {
	c := quickConfig("/k", "")
	if c.starts == 0 || len(c.conns) == 0 || len(c.bursts) == 0 || c.burstRuns == 0 || c.roundTrips == 0 || c.table == 0 || c.fs == 0 || c.previews == 0 || c.exec == 0 {
		t.Errorf("quick config skips a measure: %+v", c)
	}
	if c.first != 0 || len(c.sandboxes) != 0 {
		t.Errorf("quick config runs --first or --sandboxes: %+v", c)
	}
	if got, err := ints(" 1000, 10000 ,"); err != nil || len(got) != 2 || got[0] != 1000 || got[1] != 10000 {
		t.Errorf("ints: %v, %v", got, err)
	}
	for _, bad := range []string{"1k", "0", "-5"} {
		if _, err := ints(bad); err == nil {
			t.Errorf("ints(%q): no error", bad)
		}
	}
}
