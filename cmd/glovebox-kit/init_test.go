package main

import (
	"bufio"
	"encoding/json"
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

	"github.com/glovebox-dev/glovebox/internal/proctest"
	"github.com/glovebox-dev/glovebox/internal/waittest"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestInitReapsOrphans runs glovebox-kit as PID 1 of a new PID namespace,
// as a container runs its entrypoint. A prompt leaves a process of its own
// session behind, which the session's supervisor (a subreaper) adopts; the
// supervisor is then killed, so the process is re-parented to PID 1, and
// it exits: as init the kit must reap it. With GLOVEBOX_INIT=off the
// zombie stays, which shows the test can tell the difference. The sandbox
// is off: a pid namespace would end the process with the session, a mount
// namespace's /proc would hide the kit's, and a cgroup would kill it with
// the supervisor.
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

			c, _, err := wsconn.Dial(waittest.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			// sleep, in a session of its own, outlives the command and is
			// adopted by the session's supervisor; killed, the supervisor
			// leaves it to PID 1, where it exits.
			if msg := prompt(t, c, "p1", `setsid sleep 1 </dev/null >/dev/null 2>&1 & echo forked`); !strings.Contains(msg, "forked") {
				t.Fatalf("first prompt: %q", msg)
			}
			killSupervisors(t, cmd.Process.Pid)
			count := `sleep 1.5; z=0; for i in $(seq 50); do z=$(grep -l '^State:[[:space:]]*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); [ "$z" = 0 ] && break; sleep 0.1; done; echo "zombies=$z pid1=$(tr '\0' ' ' </proc/1/cmdline)"`
			msg := prompt(t, c, "p2", count)
			if !strings.Contains(msg, tc.wantZombies) {
				t.Errorf("second prompt = %q, want %q", msg, tc.wantZombies)
			}
		})
	}
}

// killSupervisors kills every sandbox supervisor under the process tree of
// pid.
func killSupervisors(t *testing.T, pid int) {
	t.Helper()
	killed := 0
	for _, p := range proctest.WithCmdline("glovebox-sandbox-init") {
		for a := p; a > 1; a = parentOf(a) {
			if a == pid {
				syscall.Kill(p, syscall.SIGKILL)
				killed++
				break
			}
		}
	}
	if killed == 0 {
		t.Fatal("no session supervisor under the kit to kill")
	}
}

// parentOf is pid's parent, or 0.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
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
