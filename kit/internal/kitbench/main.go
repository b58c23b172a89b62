// Command kitbench measures, across processes, what go test -bench cannot,
// and prints every figure as one table at the end: a real kit process's
// start to /health answering beside a minimal Go HTTP server's (the
// floor), its idle RSS, its memory per idle connection, events per second
// to one client in bursts, the prompt round trip beside a ping on the same
// connection, and the time from dialling a new session to the first
// prompt answered, warm and cold, exec and SDK ACP agent, beside a bare
// fork/exec. Optional: the first event of `echo hi` with the sandbox's
// layers on and off (--first), the memory and setup time per sandboxed
// session and of its supervisor (--sandboxes).
//
// Peers, each alternated with the kit's figure in the same loop so that a
// ratio is of one run: the original TypeScript kit's stand-in for the ping
// and prompt round trips and the server CPU per 1,000 prompts (Node and
// the ws library, client/typescript/test/v1server.mjs; it needs node and
// npm ci in client/typescript, and is skipped without them); a fork/exec
// of sh -c true and, with --sandbox-agent, sandbox-agent's process run,
// beside a command on a live session (--commands). KITBENCH_CPUPROFILE=FILE
// writes the serve role's CPU profile (go tool pprof kitbench FILE). The
// client is this
// process; the kit is another: the glovebox-kit binary given, or, for
// events and round trips, this binary re-executed in a server role
// (kit.New with a Go agent). As installed, the kit starts its sandbox
// supervisors from glovebox-sandbox beside it, and from its own binary
// without one: build both into one directory to measure what images run
// (the first line below), the kit alone to measure the fallback.
//
//	go build -o /tmp/gk/ ./cmd/glovebox-kit ./cmd/glovebox-sandbox   # then --kit /tmp/gk/glovebox-kit
//	go build -o /tmp/glovebox-kit ./cmd/glovebox-kit
//	sudo go run ./kit/internal/kitbench --kit /tmp/glovebox-kit     # every figure of BENCHMARKS.md
//	go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --quick  # CI: small counts, every measure
//	sudo go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --starts 0 --conns "" --events "" --round-trips 0 --table 0 --first 300 --sandboxes 100,1000
//	sudo go run ./kit/internal/kitbench --kit /tmp/gk/glovebox-kit --starts 0 --conns "" --events "" --round-trips 0 --table 0 --exec 2000 --sandbox-agent http://127.0.0.1:24680
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if ok, err := role(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "kitbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kitbench:", err)
		os.Exit(1)
	}
}

// config is what one run measures; its zero values skip a measure.
type config struct {
	kit          string
	starts       int
	conns        []int
	bursts       []int
	burstRuns    int
	roundTrips   int
	table        int
	commands     int
	first        int
	firstWarm    int
	sandboxes    []int
	exec         int
	sandboxAgent string
	fs           int // runs of each files measure (fs.go)
	previews     int
	original     string // the original's stand-in (v1Server), "" to skip its rows
}

// quickConfig is what CI runs: every measure but --first and
// --sandboxes, with small counts.
func quickConfig(kitPath, sandboxAgent string) config {
	return config{kit: kitPath, starts: 3, conns: []int{200}, bursts: []int{1000, 10000}, burstRuns: 3,
		roundTrips: 300, table: 3, commands: 20, firstWarm: -1, exec: 50, sandboxAgent: sandboxAgent, fs: 1, previews: 200, original: v1Server()}
}

func run() error {
	kitPath := flag.String("kit", "", "path of a glovebox-kit binary")
	starts := flag.Int("starts", 30, "how many starts to time, the kit's and a minimal Go HTTP server's")
	conns := flag.String("conns", "1000,10000", "idle connection counts to measure")
	bursts := flag.String("events", "1000,10000,100000", "event burst sizes to time to one client (the first also as a session's second prompt)")
	burstRuns := flag.Int("event-runs", 7, "how many bursts of each size")
	rounds := flag.Int("round-trips", 3000, "how many prompt round trips and pings to time on one connection")
	first := flag.Int("first", 0, "how many new sessions to time to the first event of echo hi, sandbox on and off")
	sandboxes := flag.String("sandboxes", "", "sandboxed session counts to measure memory and setup time for")
	tableN := flag.Int("table", 20, "how many new sessions to time, warm and cold, exec and SDK ACP agent")
	cmds := flag.Int("commands", 200, "how many commands to time on a live session, every layer and sandbox off, alternated with a fork/exec (and sandbox-agent's run)")
	firstWarm := flag.Int("first-warm", -1, "[agent] warm for --first's kits (-1: the manifest's default)")
	execN := flag.Int("exec", 0, "how many keystroke echoes to time through a terminal (and a tenth as many process starts to first output)")
	sandboxAgent := flag.String("sandbox-agent", "", "base URL of a running sandbox-agent server (no token), timed beside the first-prompt rows, --exec's and --fs's")
	fsRuns := flag.Int("fs", 5, "how many runs of each files measure: PUT and GET of 1 MB and 100 MB, a listing of 10,000 files (beside sandbox-agent's with --sandbox-agent)")
	previews := flag.Int("previews", 3000, "how many HTTP round trips to time straight to a node server and through a preview link of a session running it")
	quick := flag.Bool("quick", false, "every measure but --first and --sandboxes, with small counts (CI); other counts are ignored")
	flag.Parse()
	if *kitPath == "" {
		return errors.New("--kit is required")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	cfg := quickConfig(*kitPath, *sandboxAgent)
	if !*quick {
		cfg = config{kit: *kitPath, starts: *starts, burstRuns: *burstRuns, roundTrips: *rounds, table: *tableN, commands: *cmds,
			first: *first, firstWarm: *firstWarm, exec: *execN, sandboxAgent: *sandboxAgent, fs: *fsRuns, previews: *previews, original: v1Server()}
		var err error
		for _, l := range []struct {
			name, s string
			to      *[]int
		}{{"--conns", *conns, &cfg.conns}, {"--events", *bursts, &cfg.bursts}, {"--sandboxes", *sandboxes, &cfg.sandboxes}} {
			if *l.to, err = ints(l.s); err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
		}
	}
	rows, err := measure(cfg, sdkAgent())
	if len(rows) > 0 {
		fmt.Println()
		printTable(os.Stdout, rows)
	}
	return err
}

// measure runs what cfg asks for and returns the table's rows, those
// measured before an error too.
func measure(cfg config, agentJS string) (rows []row, err error) {
	step := func(what string, f func() ([]row, error)) {
		if err != nil {
			return
		}
		fmt.Fprintln(os.Stderr, "kitbench:", what)
		var rs []row
		rs, err = f()
		rows = append(rows, rs...)
		if err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
	}
	if cfg.starts > 0 {
		step("start to /health", func() ([]row, error) { return starts(cfg.kit, cfg.starts) })
	}
	for i, n := range cfg.conns {
		step(fmt.Sprintf("%d idle connections", n), func() ([]row, error) { return idle(cfg.kit, n, i == 0) })
	}
	if len(cfg.bursts) > 0 || cfg.roundTrips > 0 {
		step("events and round trips, a kit with a Go agent in its own process", func() ([]row, error) {
			s, err := startServed()
			if err != nil {
				return nil, err
			}
			defer s.stop()
			var rows []row
			if cfg.roundTrips > 0 {
				var orig *served
				if cfg.original != "" {
					if orig, err = startOriginal(cfg.original); err != nil {
						return nil, fmt.Errorf("the original's stand-in: %w", err)
					}
					defer orig.stop()
				}
				rs, err := roundTrips(s, orig, cfg.roundTrips)
				if err != nil {
					return rows, err
				}
				rows = append(rows, rs...)
			}
			for i, n := range cfg.bursts {
				r, err := events(s, n, max(cfg.burstRuns, 1), false)
				if err != nil {
					return rows, err
				}
				rows = append(rows, r)
				if i > 0 {
					continue
				}
				// The smallest burst again, as a session's second prompt:
				// what the session's setup costs a short burst.
				if r, err = events(s, n, max(cfg.burstRuns, 1), true); err != nil {
					return rows, err
				}
				rows = append(rows, r)
			}
			return rows, nil
		})
	}
	if cfg.table > 0 {
		step("time to the first command, warm and cold", func() ([]row, error) { return table(cfg.kit, cfg.table, agentJS, cfg.sandboxAgent) })
	}
	if cfg.exec > 0 {
		step("terminals and processes", func() ([]row, error) { return execRows(cfg.kit, cfg.exec, cfg.sandboxAgent) })
	}
	if cfg.commands > 0 {
		step("a command on a live session", func() ([]row, error) { return commands(cfg.kit, cfg.commands, cfg.sandboxAgent) })
	}
	if cfg.first > 0 {
		step("first event of echo hi, sandbox on and off", func() ([]row, error) { return firstCommand(cfg.kit, cfg.first, cfg.firstWarm) })
	}
	if cfg.fs > 0 {
		step("a session's files", func() ([]row, error) { return fsBench(cfg.kit, cfg.fs, cfg.sandboxAgent) })
	}
	if cfg.previews > 0 {
		step("preview round trips", func() ([]row, error) { return previewRoundTrips(cfg.kit, cfg.previews) })
	}
	for _, n := range cfg.sandboxes {
		step(fmt.Sprintf("%d sandboxed sessions", n), func() ([]row, error) { return sessions(cfg.kit, n) })
	}
	return rows, err
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
