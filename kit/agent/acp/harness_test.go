package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/acp/internal/testagents"
	"github.com/glovebox-dev/glovebox/protocol"
)

// needNode is node, or a skip (a failure when CI is set) when it is not
// installed.
func needNode(t testing.TB) string {
	t.Helper()
	return testagents.Node(t)
}

func sdkAgentSpec(t testing.TB) *protocol.AgentSpec {
	node := needNode(t)
	script := filepath.Join(testagents.Dir(t, "agent"), "agent.mjs")
	return &protocol.AgentSpec{Type: protocol.AgentACP, Command: []string{node, script}, Env: map[string]string{"ACP_TEST_EXTRA": "from-spec"}}
}

func rawAgentSpec(t testing.TB, env map[string]string) *protocol.AgentSpec {
	node := needNode(t)
	script := filepath.Join(testagents.Dir(t, "raw"), "agent.mjs")
	return &protocol.AgentSpec{Type: protocol.AgentACP, Command: []string{node, script}, Env: env}
}

// testSession makes a session with its own directories under t.TempDir.
func testSession(t testing.TB) (*agent.Session, *testkit.LogBuffer) {
	t.Helper()
	root := t.TempDir()
	dirs := agent.Dirs{Work: filepath.Join(root, "work"), Input: filepath.Join(root, "input"), Output: filepath.Join(root, "output")}
	for _, d := range []string{dirs.Work, dirs.Input, dirs.Output} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testkit.LogBuffer{}
	var w io.Writer = logs
	if tt, ok := t.(*testing.T); ok {
		w = io.MultiWriter(logs, tt.Output())
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env := append(os.Environ(),
		"GLOVEBOX_WORK="+dirs.Work, "GLOVEBOX_INPUT="+dirs.Input, "GLOVEBOX_OUTPUT="+dirs.Output, "GLOVEBOX_SESSION=s1")
	m, _ := protocol.ParseManifest([]byte(`{}`))
	return &agent.Session{ID: "s1", Dirs: dirs, Env: env, Manifest: m, Log: log}, logs
}

// open starts an agent for a fresh session and closes it when the test
// ends, checking that nothing it started is left behind. Its handshake
// gets testkit.Timeout.
func open(t *testing.T, spec *protocol.AgentSpec, tune func(*acpAgent)) (*conversation, *agent.Session, *testkit.LogBuffer) {
	t.Helper()
	return openWithin(t, spec, tune, testkit.Timeout, "the agent's handshake")
}

// openWithin is open with a handshake (start, initialize, session/new)
// given within, failing with a message naming what it waited for.
func openWithin(t *testing.T, spec *protocol.AgentSpec, tune func(*acpAgent), within time.Duration, what string) (*conversation, *agent.Session, *testkit.LogBuffer) {
	t.Helper()
	s, logs := testSession(t)
	before := runtime.NumGoroutine()
	a, err := New(spec, s.Log)
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(a.(*acpAgent))
	}
	conv, err := a.Open(testkit.Context(t, "Open"), s)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	c := conv.(*conversation)
	ctx, cancel := context.WithTimeoutCause(context.Background(), within, fmt.Errorf("gave up after %v waiting for %s", within, what))
	defer cancel()
	if _, err := c.ensure(ctx); err != nil {
		c.Close()
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() {
		pids := c.pids()
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			if err := c.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
			if err := c.Close(); err != nil {
				t.Errorf("second Close() = %v", err)
			}
		}()
		testkit.Wait(t, closed, "Close to stop the agent")
		for _, pid := range pids {
			if !gone(pid) {
				t.Errorf("process %d still runs after Close", pid)
			}
		}
		testkit.Goroutines(t, before)
	})
	return c, s, logs
}

// gone reports whether a process has ended. A process the kit killed
// after its parent died is reaped by init, which may take a moment; until
// then it is a zombie, which counts as gone.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
	rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// pids are the agent's and its terminals' processes.
func (c *conversation) pids() []int {
	var pids []int
	c.mu.Lock()
	if c.proc != nil {
		pids = append(pids, c.proc.sp.Pid())
	}
	c.mu.Unlock()
	c.terms.mu.Lock()
	for _, t := range c.terms.m {
		pids = append(pids, t.sp.Pid())
	}
	c.terms.mu.Unlock()
	return pids
}

func (c *conversation) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.sp.Pid()
}

// testTurn is a Turn that records what the agent does.
type testTurn struct {
	text   string
	inputs []agent.Input
	skills []agent.SkillResult
	sess   *agent.Session
	// answer answers Ask; nil blocks until ctx ends.
	answer func(n int, input json.RawMessage) (json.RawMessage, error)
	// onEvent, if set, sees every event as it is emitted.
	onEvent func(eventType string, data json.RawMessage)

	mu     sync.Mutex
	events []recorded
	asks   []json.RawMessage
	done   bool
}

type recorded struct {
	Type string
	Data json.RawMessage
}

func (t *testTurn) ID() string                       { return "req_1" }
func (t *testTurn) Text() string                     { return t.text }
func (t *testTurn) Inputs() []agent.Input            { return t.inputs }
func (t *testTurn) Skills() []agent.SkillResult      { return t.skills }
func (t *testTurn) Session() *agent.Session          { return t.sess }
func (t *testTurn) Show(string, any) (string, error) { return "slot_x", nil }
func (t *testTurn) Clear(string) error               { return nil }
func (t *testTurn) TagOutput(string) error           { return nil }

func (t *testTurn) Emit(eventType string, data any) error {
	raw, ok := data.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(data); err != nil {
			return err
		}
	}
	if !json.Valid(raw) {
		return fmt.Errorf("event %s: invalid JSON %s", eventType, raw)
	}
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return agent.ErrTurnDone
	}
	t.events = append(t.events, recorded{eventType, append(json.RawMessage(nil), raw...)})
	f := t.onEvent
	t.mu.Unlock()
	if f != nil {
		f(eventType, raw)
	}
	return nil
}

func (t *testTurn) Ask(ctx context.Context, renderer string, input any) (json.RawMessage, error) {
	raw, _ := json.Marshal(input)
	if renderer != permissionRenderer {
		return nil, fmt.Errorf("renderer %q, want %q", renderer, permissionRenderer)
	}
	t.mu.Lock()
	t.asks = append(t.asks, raw)
	n := len(t.asks)
	t.mu.Unlock()
	if t.answer == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return t.answer(n, raw)
}

func (t *testTurn) finish() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *testTurn) recorded() []recorded {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]recorded(nil), t.events...)
}

func (t *testTurn) ofType(typ string) []json.RawMessage {
	var out []json.RawMessage
	for _, e := range t.recorded() {
		if e.Type == typ {
			out = append(out, e.Data)
		}
	}
	return out
}

func (t *testTurn) types() []string {
	var out []string
	for _, e := range t.recorded() {
		out = append(out, e.Type)
	}
	return out
}

// prompt runs one prompt with a fresh turn.
func prompt(t *testing.T, c *conversation, s *agent.Session, text string) (*testTurn, string, error) {
	t.Helper()
	tt := &testTurn{text: text, sess: s}
	msg, err := c.Prompt(testkit.Context(t, fmt.Sprintf("the answer to prompt %q", text)), tt)
	tt.finish()
	return tt, msg, err
}

func mustPrompt(t *testing.T, c *conversation, s *agent.Session, text string) (*testTurn, string) {
	t.Helper()
	tt, msg, err := prompt(t, c, s, text)
	if err != nil {
		t.Fatalf("Prompt(%q) = %v", text, err)
	}
	return tt, msg
}

// jsonEqual compares JSON documents, ignoring key order and spacing.
func jsonEqual(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: bad JSON %s: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want %s: %v", what, want, err)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, diff)
	}
}

func keys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	fs, err := objectFields(raw)
	if err != nil {
		t.Fatalf("objectFields(%s): %v", raw, err)
	}
	var ks []string
	for _, f := range fs {
		ks = append(ks, f.key)
	}
	return ks
}
