package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// kitProc is a kit process kitbench started: its command, its root
// (removed on stop), its port and its key.
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

func startWith(kitPath, manifestJSON string, env ...string) (_ *kitProc, _ time.Duration, err error) {
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
	cmd.Env = append([]string{"GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=" + strconv.Itoa(port), "PATH=/usr/bin:/bin"}, env...)
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

// isolation is the layers in force, from /health (with the key: it
// tells anyone else nothing about the sandbox).
func isolation(k *kitProc) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(k.port)+"/health", nil)
	req.Header.Set("Authorization", "Bearer "+k.key) // only the key's request gets the layers
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var h protocol.Health
	json.NewDecoder(resp.Body).Decode(&h)
	return strings.Join(h.Isolation, ", "), nil
}
