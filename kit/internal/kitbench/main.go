// Command kitbench measures, across processes, what go test -bench cannot,
// and prints every figure as one table at the end: a real kit process's
// start to /health answering beside a minimal Go HTTP server's (the
// floor), its idle RSS, its memory per idle connection, events per second
// to one client in bursts, the prompt round trip beside a ping on the same
// connection, and the time from dialling a new session to the first
// prompt answered, warm and cold, exec and SDK ACP agent, beside a bare
// fork/exec. Optional: the first event of `echo hi` with the sandbox's
// layers on and off (--first), the memory and setup time per sandboxed
// session and of its supervisor (--sandboxes). The client is this
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
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
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
	first        int
	firstWarm    int
	sandboxes    []int
	sandboxAgent string
}

// quickConfig is what CI runs: every measure but --first and
// --sandboxes, with small counts.
func quickConfig(kitPath, sandboxAgent string) config {
	return config{kit: kitPath, starts: 3, conns: []int{200}, bursts: []int{1000, 10000}, burstRuns: 3,
		roundTrips: 300, table: 3, firstWarm: -1, sandboxAgent: sandboxAgent}
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
	firstWarm := flag.Int("first-warm", -1, "[agent] warm for --first's kits (-1: the manifest's default)")
	sandboxAgent := flag.String("sandbox-agent", "", "base URL of a running sandbox-agent server (no token), timed beside the first-prompt rows")
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
		cfg = config{kit: *kitPath, starts: *starts, burstRuns: *burstRuns, roundTrips: *rounds, table: *tableN,
			first: *first, firstWarm: *firstWarm, sandboxAgent: *sandboxAgent}
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
				rs, err := roundTrips(s, cfg.roundTrips)
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
	if cfg.first > 0 {
		step("first event of echo hi, sandbox on and off", func() ([]row, error) { return firstCommand(cfg.kit, cfg.first, cfg.firstWarm) })
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

// starts times n starts of the kit to /health answering, with the
// manifest's defaults and with the sandbox off, and as many of a minimal
// Go HTTP server (this binary in its http role), interleaved.
func starts(kitPath string, n int) ([]row, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ks, offs, fs []time.Duration
	for range n {
		for _, v := range []struct {
			manifest string
			to       *[]time.Duration
		}{{`{"name":"bench"}`, &ks}, {`{"name":"bench","sandbox":{"enabled":false}}`, &offs}} {
			k, d, err := startWith(kitPath, v.manifest)
			if err != nil {
				return nil, err
			}
			*v.to = append(*v.to, d)
			k.stop()
		}
		d, err := startFloor(self)
		if err != nil {
			return nil, fmt.Errorf("minimal Go HTTP server: %w", err)
		}
		fs = append(fs, d)
	}
	return []row{startRow("kit process start to /health answering", ks, "the last of these rows"),
		startRow("the same, sandbox off", offs, "the next row"),
		startRow("minimal Go HTTP server (kitbench's http role) start to /health", fs, "the floor")}, nil
}

func startRow(measure string, ds []time.Duration, floor string) row {
	r := durRow(measure, ds, floor)
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r.spread = "min " + dur(s[0]) + ", " + r.spread
	return r
}

// startFloor times self in its http role from exec to /health answering.
func startFloor(self string) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{roleEnv + "=http", "GLOVEBOX_PORT=" + strconv.Itoa(port)}
	cmd.Stderr = os.Stderr
	k := &kitProc{cmd: cmd, port: port}
	d, err := waitHealth(k)
	if err == nil {
		k.stop()
	}
	return d, err
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

type kitProc struct {
	cmd  *exec.Cmd
	root string
	port int
	key  string
}

func (k *kitProc) stop() {
	k.cmd.Process.Signal(syscall.SIGTERM)
	k.cmd.Wait()
	if k.root != "" {
		os.RemoveAll(k.root)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start runs a kit with the exec agent in a fresh root and times it from
// exec to the first 200 from /health.
func start(kitPath string) (*kitProc, time.Duration, error) {
	return startWith(kitPath, `{"name":"bench"}`)
}

func startWith(kitPath, manifestJSON string) (_ *kitProc, _ time.Duration, err error) {
	root, err := os.MkdirTemp("/var/tmp", "kitbench-")
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(root)
		}
	}()
	key := protocol.NewKey()
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, 0, err
	}
	m, err := protocol.ParseManifest([]byte(manifestJSON))
	if err != nil {
		return nil, 0, err
	}
	m.KeyFingerprint = protocol.Fingerprint(key)
	b, _ := json.Marshal(m)
	manifest := filepath.Join(root, "glovebox.json")
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		return nil, 0, err
	}
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(kitPath, "--manifest", manifest, "--root", root)
	cmd.Env = []string{"GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=" + strconv.Itoa(port), "PATH=/usr/bin:/bin"}
	k := &kitProc{cmd: cmd, root: root, port: port, key: key}
	d, err := waitHealth(k)
	if err != nil {
		return nil, 0, err
	}
	return k, d, nil
}

// waitHealth starts k's command and times it to the first 200 from
// /health, for 10 s at most.
func waitHealth(k *kitProc) (time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(k.port) + "/health"
	t0 := time.Now()
	if err := k.cmd.Start(); err != nil {
		return 0, err
	}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(t0), nil
			}
		}
		if time.Since(t0) > 10*time.Second {
			k.cmd.Process.Kill()
			k.cmd.Wait()
			return 0, fmt.Errorf("%s did not answer /health within 10s: %v", k.cmd.Path, err)
		}
	}
}

func rss(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// idle opens n idle sessions to a fresh kit and reports its RSS growth,
// and with base its RSS before them.
func idle(kitPath string, n int, withBase bool) ([]row, error) {
	k, _, err := start(kitPath)
	if err != nil {
		return nil, err
	}
	defer k.stop()
	time.Sleep(500 * time.Millisecond)
	base, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	url := "ws://127.0.0.1:" + strconv.Itoa(k.port) + "/"
	h := http.Header{"Authorization": {"Bearer " + k.key}}
	var cs []*wsconn.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, _, err := wsconn.Dial(context.Background(), url, wsconn.DialOptions{Header: h})
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		if _, err := c.ReadMessage(); err != nil { // hello
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	time.Sleep(2 * time.Second)
	after, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	var rows []row
	if withBase {
		rows = append(rows, row{measure: "kit idle RSS after boot", median: fmt.Sprintf("%.1f MiB", float64(base)/(1<<20)), runs: 1,
			floor: "original TS kit: 53.7 MiB"})
	}
	return append(rows, row{measure: fmt.Sprintf("RSS growth per idle authenticated WebSocket, %d", n),
		median: fmt.Sprintf("%.1f KiB", float64(after-base)/float64(n)/1024), spread: fmt.Sprintf("RSS %.1f MiB with them", float64(after)/(1<<20)),
		runs: 1, floor: "original TS kit: 13.1 KiB at 1,000, 7.2 KiB at 10,000"}), nil
}

// firstCommand times, n times each, a bare fork/exec of /bin/sh -c 'echo
// hi' to its first byte of output (the floor), then a new session dialled
// to a kit and prompted with echo hi, to the prompt's first event, with
// every sandbox layer the machine allows and with the sandbox off.
func firstCommand(kitPath string, n, warm int) ([]row, error) {
	agentJSON := ""
	if warm >= 0 {
		agentJSON = `,"agent":{"type":"exec","warm":` + strconv.Itoa(warm) + `}`
	}
	var floor []time.Duration
	for i := 0; i < n; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command("/bin/sh", "-c", "echo hi")
		cmd.Stdout = w
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		w.Close()
		buf := make([]byte, 8)
		_, err = r.Read(buf)
		floor = append(floor, time.Since(t0))
		cmd.Wait()
		r.Close()
		if err != nil {
			return nil, err
		}
	}
	rows := []row{durRow("fork/exec of /bin/sh -c 'echo hi' to its output", floor, "the floor of the next two")}
	for _, v := range []struct{ name, manifest string }{
		{"every layer", `{"name":"bench"` + agentJSON + `}`},
		{"sandbox off", `{"name":"bench","sandbox":{"enabled":false}` + agentJSON + `}`},
	} {
		k, _, err := startWith(kitPath, v.manifest)
		if err != nil {
			return nil, err
		}
		layers, _ := isolation(k)
		var ds []time.Duration
		for i := 0; i < n; i++ {
			d, err := firstEvent(k)
			if err != nil {
				k.stop()
				return nil, err
			}
			ds = append(ds, d)
		}
		k.stop()
		rows = append(rows, durRow("new session to the first event of echo hi, "+v.name, ds, "fork/exec floor; layers: "+layers))
	}
	return rows, nil
}

func isolation(k *kitProc) (string, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(k.port) + "/health")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var h protocol.Health
	json.NewDecoder(resp.Body).Decode(&h)
	return strings.Join(h.Isolation, ", "), nil
}

// firstEvent dials a new session, prompts echo hi and returns the time to
// the prompt's first event; it then waits for the prompt to end.
func firstEvent(k *kitProc) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	c, _, err := wsconn.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.ReadMessage(); err != nil { // hello
		return 0, err
	}
	if err := c.WriteText([]byte(`{"type":"prompt","id":"p","text":"echo hi","inputs":{}}`)); err != nil {
		return 0, err
	}
	var d time.Duration
	for {
		b, err := c.ReadMessage()
		if err != nil {
			return 0, err
		}
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if m.Type == "event" && d == 0 {
			d = time.Since(t0)
		}
		if m.Type == "complete" || m.Type == "error" {
			if m.Type == "error" {
				return 0, fmt.Errorf("prompt failed: %s", b)
			}
			return d, nil
		}
	}
}

// sessions opens n sessions to a fresh kit, each running one prompt (so
// that its sandbox exists: directories, uid, cgroup), keeps them open, and
// reports the setup time per session and the kit's RSS per session.
func sessions(kitPath string, n int) ([]row, error) {
	k, _, err := start(kitPath)
	if err != nil {
		return nil, err
	}
	defer k.stop()
	time.Sleep(300 * time.Millisecond)
	base, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Authorization": {"Bearer " + k.key}}
	var cs []*wsconn.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		c, _, err := wsconn.Dial(context.Background(), "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: h})
		if err != nil {
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
		cs = append(cs, c)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		c.ReadMessage()
		c.WriteText([]byte(`{"type":"prompt","id":"p","text":"true","inputs":{}}`))
		for {
			b, err := c.ReadMessage()
			if err != nil {
				return nil, fmt.Errorf("session %d: %w", i, err)
			}
			if strings.Contains(string(b), `"complete"`) || strings.Contains(string(b), `"error"`) {
				break
			}
		}
		ds = append(ds, time.Since(t0))
	}
	time.Sleep(time.Second)
	after, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	layers, _ := isolation(k)
	rows := []row{
		durRow(fmt.Sprintf("%d sandboxed sessions: setup and first prompt `true`", n), ds, "layers: "+layers),
		{measure: fmt.Sprintf("kit RSS per sandboxed session, %d", n), median: fmt.Sprintf("%.1f KiB", float64(after-base)/float64(n)/1024),
			spread: fmt.Sprintf("RSS %.1f MiB idle, %.1f MiB with them", float64(base)/(1<<20), float64(after)/(1<<20)), runs: 1},
	}
	if r, err := supervisorMemory(k.cmd.Process.Pid); err == nil {
		rows = append(rows, r)
	} else {
		fmt.Fprintln(os.Stderr, "kitbench: supervisors' memory:", err)
	}
	return rows, nil
}

// supervisorMemory reads smaps_rollup of every sandbox supervisor the kit
// pid runs (its children named glovebox-sandbox-init: one a session, and
// the warm ones) and reports the median private memory and PSS of one.
// Private is what each session costs on its own; PSS adds its share of
// the pages it shares (the binary's text, with the kit's when it is the
// kit's own binary).
func supervisorMemory(pid int) (row, error) {
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		kids = append(kids, strings.Fields(string(b))...)
	}
	var private, pss []int64
	exe := ""
	for _, kid := range kids {
		cmdline, _ := os.ReadFile("/proc/" + kid + "/cmdline")
		if !strings.HasPrefix(string(cmdline), sandbox.InitName+"\x00") {
			continue
		}
		b, err := os.ReadFile("/proc/" + kid + "/smaps_rollup")
		if err != nil {
			continue
		}
		var priv, p int64
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Private_Clean:", "Private_Dirty:":
				priv += kb
			case "Pss:":
				p = kb
			}
		}
		private, pss = append(private, priv), append(pss, p)
		if exe == "" {
			exe, _ = os.Readlink("/proc/" + kid + "/exe")
		}
	}
	if len(private) == 0 {
		return row{}, fmt.Errorf("the kit %d runs no supervisor", pid)
	}
	sort.Slice(private, func(i, j int) bool { return private[i] < private[j] })
	sort.Slice(pss, func(i, j int) bool { return pss[i] < pss[j] })
	return row{measure: "sandbox supervisor memory per session: private (PSS)",
		median: fmt.Sprintf("%d KiB (%d KiB)", private[len(private)/2], pss[len(pss)/2]),
		spread: fmt.Sprintf("%d supervisors running %s", len(private), filepath.Base(exe)), runs: len(private)}, nil
}
