package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/acp"
	"github.com/glovebox-dev/glovebox/kit/agent/acp/internal/testagents"
	"github.com/glovebox-dev/glovebox/protocol"
)

type acpKit struct {
	srv      *kit.Server
	url, key string
	root     string
	close    func() // closes the kit and its server, once; also a cleanup
	uidBase  int    // the first of the kit's session uids, 0 for the default
}

// newACPKit serves command as the box's ACP agent with warm warm sessions.
func newACPKit(t *testing.T, command []string, warm int, env map[string]string) *acpKit {
	t.Helper()
	return serveACP(t, &protocol.AgentSpec{Type: protocol.AgentACP, Command: command, Warm: &warm, Env: env}, slog.LevelInfo)
}

// serveACP serves spec as the box's agent in a real kit on a loopback
// server, logging at level to the test's output.
func serveACP(t *testing.T, spec *protocol.AgentSpec, level slog.Level) *acpKit {
	t.Helper()
	key := protocol.NewKey()
	root := t.TempDir()
	m, err := protocol.ParseManifest([]byte(`{"name":"acp-box","version":"0.1.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.Agent = spec
	log := testkit.Logger(t, level)
	ag, err := acp.New(m.Agent, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kit.New(kit.Options{Manifest: m, Key: key, Root: root, Agent: ag, Logger: log, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	var once sync.Once
	closeKit := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := srv.Close(ctx); err != nil {
				t.Errorf("kit Close: %v", err)
			}
			ts.Close()
		})
	}
	t.Cleanup(closeKit)
	return &acpKit{srv: srv, url: ts.URL, key: key, root: root, close: closeKit}
}

// acpProbe is what a session's first prompt sees, through the agent itself
// (its cwd and GLOVEBOX_* variables) and through a terminal it starts in
// the session's sandbox (uid, cwd, environment, files, namespaces).
func acpProbe(t *testing.T, k *acpKit) (string, map[string]any) {
	t.Helper()
	c := dial(t, k.url, k.key)
	defer c.close()
	hello := c.next()
	sid, _ := hello["session_id"].(string)
	c.prompt("p1", "env", nil)
	end := last(c.finish("p1"))
	if end["type"] != "complete" {
		t.Fatalf("env prompt: %v", end)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(end["message"].(string)), &env); err != nil {
		t.Fatalf("env answer %q: %v", end["message"], err)
	}
	c.prompt("p2", `shell id -u; pwd; env | sort; ls -ln "$GLOVEBOX_WORK" "$GLOVEBOX_INPUT" "$GLOVEBOX_OUTPUT"; stat -c '%a %u' "$GLOVEBOX_WORK"; tr '\0' ' ' </proc/1/cmdline; echo`, nil)
	end = last(c.finish("p2"))
	if end["type"] != "complete" {
		t.Fatalf("shell prompt: %v", end)
	}
	out := end["message"].(string)
	c.prompt("p3", "count", nil)
	if end := last(c.finish("p3")); end["message"] != "3" {
		t.Errorf("prompts served by the session's agent process = %v, want 3: a process serves one session", end["message"])
	}
	uid := strings.SplitN(out, "\n", 2)[0]
	norm := func(s string) string {
		s = strings.ReplaceAll(s, k.root, "<root>")
		s = strings.ReplaceAll(s, filepath.Base(filepath.Dir(k.root)), "<test>")
		s = strings.ReplaceAll(s, sid, "<session>")
		return strings.ReplaceAll(s, uid, "<uid>")
	}
	for _, key := range []string{"cwd", "sessionCwd", "work", "input", "output"} {
		if s, ok := env[key].(string); ok {
			env[key] = norm(s)
		}
	}
	delete(env, "pid")
	return norm(out), env
}

// TestWarmACPAgentIsACold one: a warm session's agent (spawned, initialize
// and session/new done before the connection) and its terminals see what
// a cold session's see.
func TestWarmACPAgentIsAColdOne(t *testing.T) {
	t.Parallel()
	command := testAgent(t)
	var wOut, cOut string
	var wEnv, cEnv map[string]any
	t.Run("warm", func(t *testing.T) {
		k := newACPKit(t, command, 1, map[string]string{"ACP_TEST_EXTRA": "x"})
		testkit.Until(t, "a warm session", func() bool { return k.srv.WarmStats().Ready == 1 })
		wOut, wEnv = acpProbe(t, k)
		if st := k.srv.WarmStats(); st.Taken != 1 || st.Missed != 0 {
			t.Errorf("WarmStats() = %+v, want the session taken warm", st)
		}
	})
	t.Run("cold", func(t *testing.T) {
		k := newACPKit(t, command, 0, map[string]string{"ACP_TEST_EXTRA": "x"})
		cOut, cEnv = acpProbe(t, k)
	})
	if wOut == "" || cOut == "" {
		t.Fatal("a probe did not run")
	}
	if diff := cmp.Diff(cOut, wOut); diff != "" {
		t.Errorf("a terminal's view, cold vs warm (-cold +warm):\n%s", diff)
	}
	if diff := cmp.Diff(cEnv, wEnv); diff != "" {
		t.Errorf("the agent's view, cold vs warm (-cold +warm):\n%s", diff)
	}
}

// A pool agent killed while it waits is replaced, never handed out.
func TestWarmACPAgentKilledIsReplaced(t *testing.T) {
	command := testAgent(t)
	// The agent is found by a mark of this test's own in its environment,
	// never by its script's path, which every test of the package runs.
	mark := fmt.Sprintf("ACP_TEST_MARK=%d-%d", os.Getpid(), time.Now().UnixNano())
	name, value, _ := strings.Cut(mark, "=")
	k := newACPKit(t, command, 1, map[string]string{name: value})
	testkit.Until(t, "a warm session", func() bool { return k.srv.WarmStats().Ready == 1 })
	pids := testkit.WithEnv(mark)
	if len(pids) != 1 {
		t.Fatalf("agent processes %v, want the one warm session's", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, "the dead agent's session replaced", func() bool {
		st := k.srv.WarmStats()
		return st.Replaced == 1 && st.Ready == 1
	})
	c := dial(t, k.url, k.key)
	defer c.close()
	c.next()
	c.prompt("p1", "env", nil)
	if end := last(c.finish("p1")); end["type"] != "complete" {
		t.Fatalf("first prompt on the replacement: %v", end)
	}
	if alive := testkit.WithEnv(mark); len(alive) == 0 {
		t.Error("no agent process runs for the session")
	}
	c.prompt("p2", "count", nil)
	if end := last(c.finish("p2")); end["message"] != "2" {
		t.Errorf("prompts the session's agent served = %v, want 2 (its own process)", end["message"])
	}
	if st := k.srv.WarmStats(); st.Taken != 1 {
		t.Errorf("WarmStats() = %+v", st)
	}
}

// TestWarmRealClaudeCodeACP: Zed's Claude Code adapter, started warm
// (initialize and session/new done before the connection), answers the
// first prompt as a cold one does: the commands it announced after
// session/new reach that prompt, which fails asking for authentication.
func TestWarmRealClaudeCodeACP(t *testing.T) {
	t.Parallel()
	testagents.Node(t)
	bin := filepath.Join(testagents.Dir(t, "realagents"), "node_modules", ".bin", "claude-code-acp")
	k := newACPKit(t, []string{bin}, 1, map[string]string{
		"HOME":              "/tmp",
		"IS_SANDBOX":        "1",
		"ANTHROPIC_API_KEY": "",
	})
	// The CLI is large: its start on a loaded fresh machine is given more
	// than the kit's own 2-minute handshake timeout, so a hang fails as the
	// kit's handshake error (WarmStats().Failed); the deadline is a backstop.
	const realStart = 2*time.Minute + 30*time.Second
	for deadline := time.Now().Add(realStart); k.srv.WarmStats().Ready != 1; time.Sleep(10 * time.Millisecond) {
		if st := k.srv.WarmStats(); st.Failed > 0 || time.Now().After(deadline) {
			t.Fatalf("no warm Claude Code session (node starting the CLI, then initialize and session/new) within %v: %+v", realStart, st)
		}
	}
	c := dial(t, k.url, k.key)
	defer c.close()
	c.next()
	c.prompt("p1", "Say hello.", nil)
	fs := c.finish("p1")
	end := last(fs)
	msg, _ := end["error"].(map[string]any)
	if end["type"] != "error" || msg["code"] != protocol.CodeAgent || !strings.Contains(msg["message"].(string), "requires authentication (auth methods claude-login)") {
		t.Fatalf("first prompt ended with %v, want an AgentError naming the auth method", end)
	}
	if len(events(fs, "available_commands_update")) == 0 {
		t.Errorf("frames %v, want the available_commands_update sent after session/new", fs)
	}
	if st := k.srv.WarmStats(); st.Taken != 1 {
		t.Errorf("WarmStats() = %+v, want the session taken warm", st)
	}
}
