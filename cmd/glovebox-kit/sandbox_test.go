package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// hostile is the kit binary serving a box whose prompts are an
// attacker's, with the box key and storage credentials in its
// environment as a deployment has them.
type hostile struct {
	t     *testing.T
	key   string
	port  string
	pid   int // the kit's pid
	root  string
	state string
}

const awsSecret = "aws-secret-never-for-agents"

// off turns a sandbox layer off in the manifest.
func off() *bool { f := false; return &f }

func startHostile(t *testing.T, sb *protocol.SandboxSpec, lim protocol.Limits) *hostile {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root, as the kit runs in its image")
	}
	key := protocol.NewKey()
	m, _ := protocol.ParseManifest([]byte(`{"name":"hostile","agent":{"type":"exec"}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.Sandbox = sb
	m.Limits = lim
	b, _ := json.Marshal(m)
	dir := t.TempDir()
	man := filepath.Join(dir, "glovebox.json")
	os.WriteFile(man, b, 0o644)
	// As in the image: the directories above the box's are traversable.
	root, err := os.MkdirTemp("/var/tmp", "hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	cmd := exec.Command(os.Args[0], "--manifest", man, "--root", root)
	cmd.Env = []string{"GLOVEBOX_KIT_AS_MAIN=1", "PATH=/usr/local/bin:/usr/bin:/bin",
		"GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0", "AWS_ACCESS_KEY_ID=AKIAHOSTILETEST", "AWS_SECRET_ACCESS_KEY=" + awsSecret}
	port, stop := startKit(t, cmd)
	t.Cleanup(stop)
	return &hostile{t: t, key: key, port: port, pid: cmd.Process.Pid, root: root, state: filepath.Join(root, "var", "glovebox")}
}

func (h *hostile) dial(query string) (*wsconn.Conn, string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, "ws://127.0.0.1:"+h.port+"/"+query, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + h.key}}})
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := c.ReadMessage()
	if err != nil {
		h.t.Fatalf("hello: %v", err)
	}
	var hello struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(b, &hello)
	return c, hello.SessionID
}

// environment reads /environment's isolation report.
func (h *hostile) isolation() protocol.Isolation {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+h.port+"/environment", nil)
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env protocol.Environment
	json.NewDecoder(resp.Body).Decode(&env)
	if env.Isolation == nil {
		h.t.Fatal("/environment has no isolation report")
	}
	return *env.Isolation
}

// promptResult runs one prompt and returns its last frame.
func promptResult(t *testing.T, c *wsconn.Conn, id, text string) map[string]any {
	t.Helper()
	return promptInputs(t, c, id, text, map[string]protocol.FileRef{})
}

// The attack a prompt makes on the kit's secrets: every process's
// environment, the kit's memory, and ptrace.
func keyAttack(pid int) string {
	// The patterns do not spell what they find: the shell's own initial
	// environment, which the first line reads too, holds this text.
	return fmt.Sprintf(`
for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ 2>/dev/null; done | grep -E 'GLOVEBOX_KE[Y]=|AW[S]_' | sort -u
env | grep -E 'GLOVEBOX_KE[Y]|AW[S]_' 
head -c 65536 /proc/%[1]d/mem >/dev/null 2>&1 && echo MEM-READ
perl -e '$r = syscall(101, 16, %[1]d, 0, 0); print $r == 0 ? "PTRACE-ATTACHED\n" : ""'
kill -STOP %[1]d 2>/dev/null && echo KIT-STOPPED
echo attack-done`, pid)
}

func TestKeyOutOfReach(t *testing.T) {
	for _, tc := range []struct {
		name string
		sb   *protocol.SandboxSpec
		want []string // layers that must be reported in force
		lost []string // layers that must be reported not in force
	}{
		{"every layer", nil, []string{"users", "mount", "pid", "network", "cgroup"}, nil},
		{"uids only", &protocol.SandboxSpec{Mount: off(), PID: off(), Network: off(), Cgroup: off()}, []string{"users"}, []string{"mount", "pid", "network", "cgroup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostile(t, tc.sb, protocol.Limits{})
			iso := h.isolation()
			for _, l := range tc.want {
				if !slices.Contains(iso.Active, l) {
					t.Errorf("layer %s not reported in force: %+v", l, iso)
				}
			}
			for _, l := range tc.lost {
				if iso.Inactive[l] == "" {
					t.Errorf("layer %s not reported as off: %+v", l, iso)
				}
			}
			c, _ := h.dial("")
			m := promptResult(t, c, "attack", keyAttack(h.pid))
			// The attack ran under the supervisor the images ship.
			checkSupervisors(t, h.pid, siblingOfTestBinary(t))
			msg, _ := m["message"].(string)
			if !strings.Contains(msg, "attack-done") {
				t.Fatalf("the attack did not run: %v", m)
			}
			for _, leak := range []string{h.key, "GLOVEBOX_KEY=", awsSecret, "AWS_", "MEM-READ", "PTRACE-ATTACHED", "KIT-STOPPED"} {
				if strings.Contains(msg, leak) {
					t.Errorf("a prompt got %q:\n%s", leak, msg)
				}
			}
			// The kit is unharmed and still serves.
			if m := promptResult(t, c, "after", "echo still-serving"); m["message"] != "still-serving\n" {
				t.Errorf("after the attack: %v", m)
			}
		})
	}
}

// The kit's own environment block, as /proc shows it to root, holds no
// secret either.
func TestKitEnvironBlockIsEmpty(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", h.pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(h.key)) || bytes.Contains(b, []byte(awsSecret)) {
		t.Errorf("the kit's environment block holds a secret: %q", b)
	}
	var s syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/mem", h.pid), &s); err == nil && s.Uid != 0 {
		t.Errorf("the kit's /proc/PID/mem is owned by uid %d: the kit is dumpable", s.Uid)
	}
}

func TestSessionsAreSeparate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sb   *protocol.SandboxSpec
	}{
		{"every layer", nil},
		{"uids only", &protocol.SandboxSpec{Mount: off(), PID: off(), Network: off()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostile(t, tc.sb, protocol.Limits{})
			victim, vid := h.dial("")
			if m := promptResult(t, victim, "v", `echo victim-secret > "$GLOVEBOX_WORK/private.txt"; mkdir -p "$GLOVEBOX_OUTPUT"; echo ok`); m["type"] != "complete" {
				t.Fatalf("victim: %v", m)
			}
			attacker, _ := h.dial("")
			vwork := filepath.Join(h.root, "work", vid)
			vout := filepath.Join(h.root, "output", vid)
			attack := fmt.Sprintf(`
ls "$(dirname "$GLOVEBOX_WORK")" "$(dirname "$GLOVEBOX_OUTPUT")" 2>/dev/null
cat %[1]s/private.txt 2>/dev/null
echo planted > %[2]s/planted.txt 2>/dev/null && echo PLANTED
ls -R %[3]s 2>/dev/null
cat %[3]s/*.db %[3]s/files/* 2>/dev/null | head -c 100
echo attack-done`, vwork, vout, h.state)
			m := promptResult(t, attacker, "a", attack)
			msg, _ := m["message"].(string)
			if !strings.Contains(msg, "attack-done") {
				t.Fatalf("attack did not run: %v", m)
			}
			for _, leak := range []string{vid, "victim-secret", "PLANTED", "index", "SQLite"} {
				if strings.Contains(msg, leak) {
					t.Errorf("the attacker got %q:\n%s", leak, msg)
				}
			}
			// Nothing planted comes back to the victim as its output.
			m = promptResult(t, victim, "v2", "echo fine")
			if outs, _ := m["outputs"].(map[string]any); len(outs) > 0 {
				t.Errorf("the victim's prompt returned outputs it did not write: %v", outs)
			}
		})
	}
}

func TestNothingOutlivesPromptOrSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		sb   *protocol.SandboxSpec
	}{
		{"every layer", nil},
		{"cgroup, no pid namespace", &protocol.SandboxSpec{Mount: off(), PID: off()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostile(t, tc.sb, protocol.Limits{})
			c, _ := h.dial("")
			marker := "survivor" + strconv.FormatInt(time.Now().UnixNano(), 36)
			// The prompt ends only once its survivor runs.
			m := promptResult(t, c, "p", fmt.Sprintf(`setsid bash -c 'exec -a %[1]s sleep 1000' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do pgrep -f '^%[1]s' >/dev/null && echo started && break; sleep 0.1; done`, marker))
			if m["type"] != "complete" || m["message"] != "started\n" {
				t.Fatalf("the survivor did not start: %v", m)
			}
			if pids := testkit.WithCmdline(marker); len(pids) > 0 {
				t.Errorf("a setsid process outlived its prompt: %v", pids)
			}
		})
	}
}

func TestLimitsStopAttacksAndTheBoxServes(t *testing.T) {
	h := startHostile(t, &protocol.SandboxSpec{Pids: 64}, protocol.Limits{Memory: "64MB"})
	if iso := h.isolation(); iso.Cgroup == "" {
		t.Skip("no cgroup here: ", iso.Inactive["cgroup"])
	}
	c, _ := h.dial("")
	m := promptResult(t, c, "mem", `head -c 400000000 /dev/zero | tail -c 300000000 > /dev/null; echo done`)
	if m["type"] != "error" || !strings.Contains(fmt.Sprint(m["error"]), "LimitError") || !strings.Contains(fmt.Sprint(m["error"]), "memory") {
		t.Errorf("an allocation loop: %v, want a LimitError naming memory", m)
	}
	m = promptResult(t, c, "fork", `i=0; while [ $i -lt 500 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; echo made`)
	if m["type"] != "error" || !strings.Contains(fmt.Sprint(m["error"]), "LimitError") {
		t.Errorf("a fork loop: %v, want a LimitError", m)
	}
	if m := promptResult(t, c, "ok", "echo still-serving"); m["message"] != "still-serving\n" {
		t.Errorf("after the limits: %v", m)
	}
}

// When the kit dies, whatever its sessions run dies with it.
func TestNothingOutlivesTheKit(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{})
	c, _ := h.dial("")
	marker := "orphan" + strconv.FormatInt(time.Now().UnixNano(), 36)
	b, _ := json.Marshal(map[string]any{"type": "prompt", "id": "p", "text": fmt.Sprintf(`setsid bash -c 'exec -a %[1]s sleep 1000' & exec bash -c 'exec -a %[1]s sleep 1000'`, marker), "inputs": map[string]any{}})
	if err := c.WriteText(b); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, "the prompt's two processes to start", func() bool { return len(testkit.WithCmdline(marker)) >= 2 })
	syscall.Kill(h.pid, syscall.SIGKILL)
	testkit.Until(t, "the prompt's processes to end with the kit", func() bool { return len(testkit.WithCmdline(marker)) == 0 })
}
