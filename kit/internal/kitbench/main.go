// Command kitbench measures what go test -bench cannot: a real kit
// process's start time to /health answering, its idle RSS, and its memory
// per idle connection.
//
//	go build -o /tmp/glovebox-kit ./cmd/glovebox-kit
//	go run ./kit/internal/kitbench --kit /tmp/glovebox-kit --starts 50 --conns 1000,10000
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
	flag.Parse()
	if *kitPath == "" {
		return errors.New("--kit is required")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
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

	for _, f := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--conns: %w", err)
		}
		if err := idle(*kitPath, n); err != nil {
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
func start(kitPath string) (_ *kitProc, _ time.Duration, err error) {
	root, err := os.MkdirTemp("", "kitbench-")
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(root)
		}
	}()
	key := protocol.NewKey()
	m, _ := protocol.ParseManifest([]byte(`{"name":"bench"}`))
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
