package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// roleEnv names the role a re-executed kitbench plays: "serve" (a kit with
// a Go agent, for events and round trips) or "http" (a minimal Go HTTP
// server, the floor of start to /health). Unset: the client, as run.
const roleEnv = "KITBENCH_ROLE"

// profileEnv, set in kitbench's environment, names a file the serve role
// writes its CPU profile to (go tool pprof reads it): where the kit's time
// goes under the round trips and bursts, the client in another process.
const profileEnv = "KITBENCH_CPUPROFILE"

// role runs the role roleEnv names, if any, and reports whether it did.
func role() (bool, error) {
	switch r := os.Getenv(roleEnv); r {
	case "":
		return false, nil
	case "serve":
		return true, serveKit(os.Stdout)
	case "http":
		return true, serveHTTP()
	default:
		return true, fmt.Errorf("%s=%q: unknown role; want serve or http", roleEnv, r)
	}
}

// serveHTTP is the floor of start to /health: a minimal Go HTTP server
// answering /health on GLOVEBOX_PORT, until SIGTERM.
func serveHTTP() error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("GLOVEBOX_PORT"))
	if err != nil {
		return err
	}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		ln.Close()
	}()
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// serveKit runs kit.New + Serve in this process with a Go agent: a prompt
// whose text is a number N emits N text_delta events, any other prompt
// returns at once. It prints "address key" to out, then serves until its
// standard input closes (the client is gone) or SIGTERM.
func serveKit(out io.Writer) error {
	key := protocol.NewKey()
	m, err := protocol.ParseManifest([]byte(`{"name":"kitbench","version":"0.1.0"}`))
	if err != nil {
		return err
	}
	m.KeyFingerprint = protocol.Fingerprint(key)
	data := json.RawMessage(`{"text":"hello"}`)
	ag := agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
		n, err := strconv.Atoi(t.Text())
		if err != nil {
			return "", nil
		}
		for range n {
			if err := t.Emit("text_delta", data); err != nil {
				return "", err
			}
		}
		return "", nil
	})
	dir, err := os.MkdirTemp("", "kitbench-serve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := kit.New(kit.Options{Manifest: m, Key: key, Root: dir, Agent: ag,
		Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin) // the client closes it, or dies
		stop()
	}()
	if path := os.Getenv(profileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintln(out, ln.Addr().String(), key)
	return srv.Serve(ctx, ln)
}

// served is a server of round trips and events in its own process:
// kitbench in the serve role, or the original's stand-in (no hello).
type served struct {
	cmd     *exec.Cmd
	stdin   io.Closer
	addr    string
	key     string
	noHello bool
}

// startServed re-executes this binary in the serve role and reads its
// address and key.
func startServed() (*served, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), roleEnv+"=serve")
	return startProc(cmd)
}

// startProc starts cmd, a server that prints "address key" on its
// standard output and serves until its standard input closes.
func startProc(cmd *exec.Cmd) (*served, error) {
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := bufio.NewReader(out).ReadString('\n')
		ch <- res{l, err}
	}()
	var r res
	select {
	case r = <-ch:
	case <-time.After(30 * time.Second):
		r.err = errors.New("no address within 30s")
	}
	f := strings.Fields(r.line)
	if r.err != nil || len(f) != 2 {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("kitbench's serve role did not print its address and key (%q): %v", r.line, r.err)
	}
	return &served{cmd: cmd, stdin: in, addr: f[0], key: f[1]}, nil
}

func (s *served) stop() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

func (s *served) dial() (*wsconn.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, "ws://"+s.addr+"/", wsconn.DialOptions{
		Header: http.Header{"Authorization": {"Bearer " + s.key}}, Subprotocols: []string{"glovebox.v1"}})
	if err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	if s.noHello {
		return c, nil
	}
	if _, err := c.ReadMessage(); err != nil { // hello
		c.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return c, nil
}

// untilEnd reads frames to the prompt's complete, counting events; an
// error frame is an error. It reads each frame into one reused buffer, so
// that the client, which shares the machine's cores with the kit, spends
// no more than it must on each (a client that allocated every frame
// measured itself as much as the kit).
func untilEnd(c *wsconn.Conn) (int, error) {
	events := 0
	buf := make([]byte, 0, 4<<10)
	eventPrefix := []byte(`{"type":"event"`)
	for {
		r, err := c.NextReader()
		if err != nil {
			return events, err
		}
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return events, err
			}
		}
		if bytes.HasPrefix(buf, eventPrefix) {
			events++
			continue
		}
		var m struct{ Type string }
		json.Unmarshal(buf, &m)
		switch m.Type {
		case "complete":
			return events, nil
		case "error":
			return events, fmt.Errorf("prompt failed: %s", buf)
		}
	}
}

// roundTrips times n pings and n no-op prompts, alternating, on one
// connection to s, and to orig too when it is not nil (the original's
// stand-in: each ping and prompt to one then the other, so that both see
// the same machine); then the servers' CPU time over n prompts each, in
// alternating blocks.
func roundTrips(s, orig *served, n int) ([]row, error) {
	servers := []*served{s}
	if orig != nil {
		servers = append(servers, orig)
	}
	conns := make([]*wsconn.Conn, len(servers))
	for i, sv := range servers {
		c, err := sv.dial()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	ping := make([][]time.Duration, len(servers))
	prompt := make([][]time.Duration, len(servers))
	for i := range n {
		for k, c := range conns {
			d, err := pingOnce(c)
			if err != nil {
				return nil, err
			}
			ping[k] = append(ping[k], d)
		}
		for k, c := range conns {
			d, err := promptOnce(c, i)
			if err != nil {
				return nil, err
			}
			prompt[k] = append(prompt[k], d)
		}
	}
	cpu := make([]time.Duration, len(servers))
	const block = 250
	for done := 0; done < n; done += block {
		for k, c := range conns {
			before, err := cpuTime(servers[k].cmd.Process.Pid)
			if err != nil {
				return nil, err
			}
			for i := range min(block, n-done) {
				if _, err := promptOnce(c, n+done+i); err != nil {
					return nil, err
				}
			}
			after, err := cpuTime(servers[k].cmd.Process.Pid)
			if err != nil {
				return nil, err
			}
			cpu[k] += after - before
		}
	}
	per1000 := func(d time.Duration) time.Duration { return d * 1000 / time.Duration(n) }
	pm, p99 := pct(ping[0])
	rm, r99 := pct(prompt[0])
	rows := []row{
		durRow("ping to pong, one connection", ping[0], "the floor of the next two"),
		durRow("prompt round trip, no-op Go agent, same connection", prompt[0], "ping"),
		{measure: "prompt round trip / ping", median: ratio(rm, pm), spread: "p99 " + ratio(r99, p99), runs: n, floor: "goal <= 1.5x"},
		{measure: "server CPU per 1,000 prompts (user+system)", median: dur(per1000(cpu[0])), spread: "total", runs: n, floor: "the kit's process"},
	}
	if orig == nil {
		return rows, nil
	}
	om, o99 := pct(ping[1])
	qm, q99 := pct(prompt[1])
	return append(rows,
		durRow("ping to pong, the original's stand-in (Node, ws)", ping[1], "alternated with the kit's"),
		durRow("prompt round trip, the original's stand-in", prompt[1], "alternated with the kit's"),
		row{measure: "server CPU per 1,000 prompts, the original's stand-in", median: dur(per1000(cpu[1])), spread: "total", runs: n, floor: "its node process"},
		row{measure: "ping, kit / original", median: ratio(pm, om), spread: "p99 " + ratio(p99, o99), runs: n, floor: "goal <= 1.0x"},
		row{measure: "prompt round trip, kit / original", median: ratio(rm, qm), spread: "p99 " + ratio(r99, q99), runs: n, floor: "goal <= 0.4x"},
		row{measure: "server CPU per 1,000 prompts, kit / original", median: ratio(cpu[0], cpu[1]), spread: "total", runs: n, floor: "goal <= 0.4x"},
	), nil
}

func ratio(a, b time.Duration) string { return fmt.Sprintf("%.2fx", float64(a)/float64(b)) }

// pingOnce times one ping to its pong.
func pingOnce(c *wsconn.Conn) (time.Duration, error) {
	t0 := time.Now()
	if err := c.WriteText([]byte(`{"type":"ping","ts":1}`)); err != nil {
		return 0, err
	}
	for {
		b, err := c.ReadMessage()
		if err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		if strings.Contains(string(b), `"pong"`) {
			return time.Since(t0), nil
		}
	}
}

// promptOnce times one no-op prompt to its complete.
func promptOnce(c *wsconn.Conn, i int) (time.Duration, error) {
	t0 := time.Now()
	if err := c.WriteText([]byte(`{"type":"prompt","id":"r` + strconv.Itoa(i) + `","text":"rt"}`)); err != nil {
		return 0, err
	}
	if _, err := untilEnd(c); err != nil {
		return 0, fmt.Errorf("prompt: %w", err)
	}
	return time.Since(t0), nil
}

// cpuTime is the CPU time, user and system, of every thread of process
// pid so far (the first field of each thread's schedstat, nanoseconds).
func cpuTime(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %q", dir, t.Name(), b)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// events times bursts of n text_delta events to one client, each on a
// new connection, runs times, and reports events per second. The time
// runs from the prompt's write to its complete, so a new session's setup
// (its directories and sandbox, made by its first prompt) counts; with
// second, each connection first runs a prompt of no events, and the
// burst is its second prompt, which finds the session ready.
func events(s *served, n, runs int, second bool) (row, error) {
	var rates []float64
	for range runs {
		c, err := s.dial()
		if err != nil {
			return row{}, err
		}
		if second {
			if err := c.WriteText([]byte(`{"type":"prompt","id":"ready","text":"0"}`)); err != nil {
				c.Close()
				return row{}, err
			}
			if _, err := untilEnd(c); err != nil {
				c.Close()
				return row{}, err
			}
		}
		t0 := time.Now()
		if err := c.WriteText([]byte(`{"type":"prompt","id":"p","text":"` + strconv.Itoa(n) + `"}`)); err != nil {
			c.Close()
			return row{}, err
		}
		got, err := untilEnd(c)
		d := time.Since(t0)
		c.Close()
		if err != nil {
			return row{}, err
		}
		if got != n {
			return row{}, fmt.Errorf("burst of %d events: read %d", n, got)
		}
		rates = append(rates, float64(n)/d.Seconds())
	}
	sort.Float64s(rates)
	measure := fmt.Sprintf("events/s to one client, burst of %d", n)
	if second {
		measure += ", a session's second prompt"
	}
	return row{measure: measure,
		median: rate(rates[len(rates)/2]),
		spread: "min " + rate(rates[0]) + ", max " + rate(rates[len(rates)-1]),
		runs:   runs, floor: "original TS kit: 18.9k at 10,000, 12.3k at 100,000"}, nil
}

func rate(r float64) string {
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.2fM", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.0fk", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}
