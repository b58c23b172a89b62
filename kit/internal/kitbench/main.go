// Command kitbench measures what go test -bench cannot: a real kit
// process's start time to /health answering, its idle RSS, its memory per
// idle connection, the time from dialling a new session to the first
// event of `echo hi` with the sandbox's layers on and off beside a bare
// fork/exec of /bin/sh, and the memory and setup time per sandboxed
// session. The client is this process; the kit is another.
//
//	go build -o /tmp/glovebox-kit ./cmd/glovebox-kit
//	go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --starts 50 --conns 1000,10000
//	sudo go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --starts 0 --conns "" --first 300 --sandboxes 100,1000
//	sudo go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --starts 0 --conns "" --table 100
//	go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --quick
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
	"github.com/glovebox-dev/glovebox/protocol"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kitbench:", err)
		os.Exit(1)
	}
}

func run() error {
	kitPath := flag.String("kit", "", "path of a glovebox-kit binary")
	starts := flag.Int("starts", 30, "how many starts to time")
	conns := flag.String("conns", "1000,10000", "idle connection counts to measure")
	first := flag.Int("first", 0, "how many new sessions to time to the first event of echo hi, sandbox on and off")
	sandboxes := flag.String("sandboxes", "", "sandboxed session counts to measure memory and setup time for")
	tableN := flag.Int("table", 0, "how many new sessions to time, warm and cold, exec and SDK ACP agent, printed as one table")
	firstWarm := flag.Int("first-warm", -1, "[agent] warm for --first's kits (-1: the manifest's default)")
	sandboxAgent := flag.String("sandbox-agent", "", "base URL of a running sandbox-agent server (no token), timed beside the table's rows")
	quick := flag.Bool("quick", false, "the table with a few runs only, nothing else (CI)")
	flag.Parse()
	if *kitPath == "" {
		return errors.New("--kit is required")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}

	if *quick {
		return table(*kitPath, 5, sdkAgent(), *sandboxAgent)
	}
	if *tableN > 0 {
		if err := table(*kitPath, *tableN, sdkAgent(), *sandboxAgent); err != nil {
			return err
		}
	}
	if *first > 0 {
		if err := firstCommand(*kitPath, *first, *firstWarm); err != nil {
			return err
		}
	}
	for _, f := range splitList(*sandboxes) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("--sandboxes: %w", err)
		}
		if err := sessions(*kitPath, n); err != nil {
			return err
		}
	}
	if *starts <= 0 {
		return idleAll(*kitPath, *conns)
	}
	var ds []time.Duration
	for i := 0; i < *starts; i++ {
		k, d, err := start(*kitPath)
		if err != nil {
			return err
		}
		ds = append(ds, d)
		k.stop()
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	fmt.Printf("start to /health: median %v, p90 %v, min %v (%d runs)\n", ds[len(ds)/2], ds[len(ds)*9/10], ds[0], len(ds))
	return idleAll(*kitPath, *conns)
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

func idleAll(kitPath, conns string) error {
	for _, f := range splitList(conns) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("--conns: %w", err)
		}
		if err := idle(kitPath, n); err != nil {
			return err
		}
	}
	return nil
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
	os.RemoveAll(k.root)
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
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Since(t0) > 10*time.Second {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, 0, fmt.Errorf("kit did not answer /health: %v", err)
		}
	}
	d := time.Since(t0)
	return &kitProc{cmd: cmd, root: root, port: port, key: key}, d, nil
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

// idle opens n idle sessions to a fresh kit and reports its RSS growth.
func idle(kitPath string, n int) error {
	k, _, err := start(kitPath)
	if err != nil {
		return err
	}
	defer k.stop()
	time.Sleep(500 * time.Millisecond)
	base, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return err
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
			return fmt.Errorf("connection %d: %w", i, err)
		}
		if _, err := c.ReadMessage(); err != nil { // hello
			return fmt.Errorf("connection %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	time.Sleep(2 * time.Second)
	after, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("%d idle connections: idle RSS %.1f MiB, with connections %.1f MiB, %.1f KiB per connection\n",
		n, float64(base)/(1<<20), float64(after)/(1<<20), float64(after-base)/float64(n)/1024)
	return nil
}

// stats formats the median and p99 of ds.
func stats(ds []time.Duration) string {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return fmt.Sprintf("median %v, p99 %v (%d runs)", ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond), len(ds))
}

// firstCommand times, n times each, a bare fork/exec of /bin/sh -c 'echo
// hi' to its first byte of output (the floor), then a new session dialled
// to a kit and prompted with echo hi, to the prompt's first event, with
// every sandbox layer the machine allows and with the sandbox off.
func firstCommand(kitPath string, n, warm int) error {
	agentJSON := ""
	if warm >= 0 {
		agentJSON = `,"agent":{"type":"exec","warm":` + strconv.Itoa(warm) + `}`
	}
	var floor []time.Duration
	for i := 0; i < n; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		cmd := exec.Command("/bin/sh", "-c", "echo hi")
		cmd.Stdout = w
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return err
		}
		w.Close()
		buf := make([]byte, 8)
		_, err = r.Read(buf)
		floor = append(floor, time.Since(t0))
		cmd.Wait()
		r.Close()
		if err != nil {
			return err
		}
	}
	fmt.Printf("fork/exec of /bin/sh -c 'echo hi' to its output (floor): %s\n", stats(floor))
	for _, v := range []struct{ name, manifest string }{
		{"every layer", `{"name":"bench"` + agentJSON + `}`},
		{"sandbox off", `{"name":"bench","sandbox":{"enabled":false}` + agentJSON + `}`},
	} {
		k, _, err := startWith(kitPath, v.manifest)
		if err != nil {
			return err
		}
		layers, _ := isolation(k)
		var ds []time.Duration
		for i := 0; i < n; i++ {
			d, err := firstEvent(k)
			if err != nil {
				k.stop()
				return err
			}
			ds = append(ds, d)
		}
		k.stop()
		fmt.Printf("new session to the first event of echo hi, %s (%s): %s\n", v.name, layers, stats(ds))
	}
	return nil
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
func sessions(kitPath string, n int) error {
	k, _, err := start(kitPath)
	if err != nil {
		return err
	}
	defer k.stop()
	time.Sleep(300 * time.Millisecond)
	base, err := rss(k.cmd.Process.Pid)
	if err != nil {
		return err
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
			return fmt.Errorf("session %d: %w", i, err)
		}
		cs = append(cs, c)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		c.ReadMessage()
		c.WriteText([]byte(`{"type":"prompt","id":"p","text":"true","inputs":{}}`))
		for {
			b, err := c.ReadMessage()
			if err != nil {
				return fmt.Errorf("session %d: %w", i, err)
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
		return err
	}
	layers, _ := isolation(k)
	fmt.Printf("%d sandboxed sessions (%s): setup and first prompt %s; kit RSS %.1f MiB idle, %.1f MiB with them, %.1f KiB per session\n",
		n, layers, stats(ds), float64(base)/(1<<20), float64(after)/(1<<20), float64(after-base)/float64(n)/1024)
	return nil
}
