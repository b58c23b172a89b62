package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestInitReapsOrphans runs glovebox-kit as PID 1 of a new PID namespace,
// as a container runs its entrypoint. A process that enters the namespace
// leaves an orphan, re-parented to PID 1, which then exits; as init the kit
// must reap it. With GLOVEBOX_INIT=off the zombie stays, which shows the
// test can tell the difference. (Agents' orphans no longer reach PID 1
// while their session lives: every session's supervisor is a subreaper,
// or pid 1 of the session's own pid namespace.) The sandbox is off, so
// that a prompt's /proc is the kit's namespace's.
func TestInitReapsOrphans(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for a PID namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	for _, tc := range []struct {
		name        string
		init        string
		wantZombies string
	}{
		{"init", "", "zombies=0"},
		{"no init", "off", "zombies=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := protocol.NewKey()
			root, err := os.MkdirTemp("/var/tmp", "init-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(root)
			os.Chmod(root, 0o755)
			m, _ := protocol.ParseManifest([]byte(`{"name":"cmd","agent":{"type":"exec","warm":0},"sandbox":{"enabled":false}}`))
			m.KeyFingerprint = protocol.Fingerprint(key)
			b, _ := json.Marshal(m)
			man := filepath.Join(t.TempDir(), "glovebox.json")
			os.WriteFile(man, b, 0o644)
			cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
				os.Args[0], "--manifest", man, "--root", root)
			cmd.Env = []string{"GLOVEBOX_KIT_AS_MAIN=1", "PATH=" + os.Getenv("PATH"),
				"GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0", "GLOVEBOX_INIT=" + tc.init}
			port, stop := startKit(t, cmd)
			defer stop()

			c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			// sh exits at once, so sleep is re-parented to PID 1, where
			// it exits.
			pid1 := childOf(t, cmd.Process.Pid)
			enter := exec.Command("nsenter", "--target", strconv.Itoa(pid1), "--pid", "--",
				"sh", "-c", "sleep 0.2 </dev/null >/dev/null 2>&1 & exit 0")
			if out, err := enter.CombinedOutput(); err != nil {
				t.Fatalf("nsenter: %v: %s", err, out)
			}
			if msg := prompt(t, c, "p1", `sleep 1; echo slept`); !strings.Contains(msg, "slept") {
				t.Fatalf("first prompt: %q", msg)
			}
			count := `z=0; for i in $(seq 50); do z=$(grep -l '^State:[[:space:]]*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); [ "$z" = 0 ] && break; sleep 0.1; done; echo "zombies=$z pid1=$(tr '\0' ' ' </proc/1/cmdline)"`
			msg := prompt(t, c, "p2", count)
			if !strings.Contains(msg, tc.wantZombies) {
				t.Errorf("second prompt = %q, want %q", msg, tc.wantZombies)
			}
		})
	}
}

// childOf is the only child of pid (unshare's: PID 1 of its namespace).
func childOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatalf("children of %d: %v", pid, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("children of %d: %q, want one", pid, b)
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// startKit starts cmd, waits for the kit to log its address, and returns
// the port and a function that stops the process tree.
func startKit(t *testing.T, cmd *exec.Cmd) (string, func()) {
	t.Helper()
	stderr, _ := cmd.StderrPipe()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}
	addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
	sc := bufio.NewScanner(stderr)
	port := ""
	for port == "" && sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
		t.Log(sc.Text())
	}
	if port == "" {
		stop()
		t.Fatal("no listen address logged")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return port, stop
}

// prompt runs one prompt and returns its complete message.
func prompt(t *testing.T, c *wsconn.Conn, id, text string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "prompt", "id": id, "text": text, "inputs": map[string]any{}})
	if err := c.WriteText(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		switch m["type"] {
		case "complete":
			return m["message"].(string)
		case "error":
			t.Fatalf("prompt %s failed: %v", id, m["error"])
		}
	}
}
