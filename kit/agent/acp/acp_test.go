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
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

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

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec *protocol.AgentSpec
		want string
	}{
		{"nil", nil, "no agent spec"},
		{"wrong type", &protocol.AgentSpec{Type: "exec", Command: []string{"x"}}, `agent type is "exec"`},
		{"no command", &protocol.AgentSpec{Type: "acp"}, "agent.command is empty"},
		{"empty program", &protocol.AgentSpec{Type: "acp", Command: []string{""}}, "agent.command is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.spec, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(&protocol.AgentSpec{Type: "acp", Command: []string{"agent"}}, nil); err != nil {
		t.Errorf("New(valid) = %v", err)
	}
}

func TestOpenBadCommand(t *testing.T) {
	t.Parallel()
	s, _ := testSession(t)
	a, err := New(&protocol.AgentSpec{Type: "acp", Command: []string{filepath.Join(t.TempDir(), "no-such-agent")}}, s.Log)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Open(testkit.Context(t, "Open"), s)
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent || !strings.Contains(err.Error(), "no-such-agent") {
		t.Errorf("Open(missing command) = %v, want an AgentError naming the command", err)
	}
}

func TestOpenAgentExitsAtOnce(t *testing.T) {
	t.Parallel()
	s, _ := testSession(t)
	a, err := New(&protocol.AgentSpec{Type: "acp", Command: []string{"/bin/sh", "-c", "echo cannot start >&2; exit 7"}}, s.Log)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := a.Open(testkit.Context(t, "Open"), s)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer conv.Close()
	tt := &testTurn{text: "hello", sess: s}
	_, err = conv.Prompt(testkit.Context(t, "the prompt's answer"), tt)
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("Prompt(agent that exits at once) = %v, want an AgentError with the exit status and stderr", err)
	}
}

// TestSlowStartAbort: a prompt waiting for a slow handshake returns when
// its ctx ends; the start goes on and the next prompt uses it.
func TestSlowStartAbort(t *testing.T) {
	t.Parallel()
	s, logs := testSession(t)
	gate := filepath.Join(t.TempDir(), "go")
	a, err := New(rawAgentSpec(t, map[string]string{"RAW_INIT_WAIT_FILE": gate}), s.Log)
	if err != nil {
		t.Fatal(err)
	}
	conv, err := a.Open(testkit.Context(t, "Open"), s)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	ctx, cancel := context.WithCancel(testkit.Context(t, "the prompt's answer"))
	cancel()
	if _, err := conv.Prompt(ctx, &testTurn{text: "echo early", sess: s}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt during the handshake with an ended ctx = %v, want context.Canceled", err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil { // let initialize be answered
		t.Fatal(err)
	}
	tt := &testTurn{text: "echo later", sess: s}
	msg, err := conv.Prompt(testkit.Context(t, "the prompt's answer"), tt)
	tt.finish()
	if err != nil || msg != "echo later" {
		t.Fatalf("Prompt after the handshake = %q, %v", msg, err)
	}
	if n := strings.Count(logs.String(), "acp: agent started"); n != 1 {
		t.Errorf("the agent started %d times, want once", n)
	}
}

func TestStreamsText(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	tt, msg := mustPrompt(t, c, s, "echo hello brave world")
	if msg != "hello brave world" {
		t.Errorf("message = %q, want %q", msg, "hello brave world")
	}
	var deltas []string
	for _, d := range tt.ofType("text_delta") {
		if diff := cmp.Diff([]string{"text"}, keys(t, d)); diff != "" {
			t.Errorf("text_delta keys (-want +got):\n%s", diff)
		}
		var v struct{ Text string }
		_ = json.Unmarshal(d, &v)
		deltas = append(deltas, v.Text)
	}
	if diff := cmp.Diff([]string{"hello", " brave", " world"}, deltas); diff != "" {
		t.Errorf("text deltas (-want +got):\n%s", diff)
	}
	// available_commands_update came before the prompt: held, then first.
	want := []string{"available_commands_update", "text_delta", "text_delta", "text_delta", "stop"}
	if diff := cmp.Diff(want, tt.types()); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	jsonEqual(t, "available_commands_update", tt.ofType("available_commands_update")[0],
		`{"availableCommands":[{"name":"echo","description":"echo the words back"}]}`)
	jsonEqual(t, "stop", tt.ofType("stop")[0], `{"reason":"end_turn"}`)

	// The next prompt on the same process.
	pid := c.pid()
	tt2, msg2 := mustPrompt(t, c, s, "count")
	if msg2 != "2" || c.pid() != pid {
		t.Errorf("second prompt: message %q pid %d, want \"2\" on pid %d", msg2, c.pid(), pid)
	}
	if got := tt2.ofType("available_commands_update"); len(got) != 0 {
		t.Errorf("second prompt repeated available_commands_update: %s", got)
	}
}

func TestThoughtAndExtras(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	tt, msg := mustPrompt(t, c, s, "think")
	if msg != "thought about it" {
		t.Errorf("message = %q", msg)
	}
	jsonEqual(t, "thinking_delta", tt.ofType("thinking_delta")[0], `{"text":"pondering"}`)

	tt, _ = mustPrompt(t, c, s, "extras")
	jsonEqual(t, "plan", tt.ofType("plan")[0], `{"entries":[{"content":"look around","priority":"high","status":"in_progress"}]}`)
	jsonEqual(t, "usage_update", tt.ofType("usage_update")[0], `{"used":1200,"size":200000}`)
	jsonEqual(t, "current_mode_update", tt.ofType("current_mode_update")[0], `{"currentModeId":"code"}`)
}

func TestToolCalls(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	tt, _ := mustPrompt(t, c, s, "tool")
	if diff := cmp.Diff([]string{"tool_use", "tool_call_update", "tool_use_result", "text_delta", "stop"}, tt.types()[1:]); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	use := tt.ofType("tool_use")[0]
	jsonEqual(t, "tool_use", use, `{"id":"call_1","name":"list files","input":{"dir":"/work"},
		"toolCallId":"call_1","title":"list files","kind":"read","status":"pending","rawInput":{"dir":"/work"}}`)
	if got := keys(t, use)[:3]; !cmp.Equal(got, []string{"id", "name", "input"}) {
		t.Errorf("tool_use starts with keys %v, want id, name, input", got)
	}
	jsonEqual(t, "tool_call_update", tt.ofType("tool_call_update")[0], `{"toolCallId":"call_1","status":"in_progress"}`)

	res := tt.ofType("tool_use_result")[0]
	var r map[string]any
	_ = json.Unmarshal(res, &r)
	if _, ok := r["duration_ms"].(float64); !ok {
		t.Errorf("tool_use_result has no duration_ms: %s", res)
	}
	delete(r, "duration_ms")
	got, _ := json.Marshal(r)
	jsonEqual(t, "tool_use_result", got, `{"tool_name":"list files","call_id":"call_1",
		"result":{"status":"success","data":{"files":["a.txt"]}},"id":"call_1","name":"list files",
		"toolCallId":"call_1","status":"completed",
		"content":[{"type":"content","content":{"type":"text","text":"a.txt"}}],"rawOutput":{"files":["a.txt"]}}`)
	if got := keys(t, res)[:6]; !cmp.Equal(got, []string{"tool_name", "call_id", "result", "duration_ms", "id", "name"}) {
		t.Errorf("tool_use_result keys start %v, want v1's order", got)
	}

	tt, _ = mustPrompt(t, c, s, "failtool")
	res = tt.ofType("tool_use_result")[0]
	var fr struct {
		ToolName string `json:"tool_name"`
		Result   struct {
			Status, Message string
			Data            json.RawMessage
		}
	}
	_ = json.Unmarshal(res, &fr)
	if fr.ToolName != "explode" || fr.Result.Status != "error" || fr.Result.Message != "boom" {
		t.Errorf("failed tool_use_result = %s, want tool explode, status error, message boom", res)
	}
	jsonEqual(t, "failed result data", fr.Result.Data, `[{"type":"content","content":{"type":"text","text":"boom"}}]`)
}

func TestPermission(t *testing.T) {
	tests := []struct {
		name    string
		answers []string // display_resolve values, in order; "reject" rejects
		want    string
		asks    int
	}{
		{"optionId string", []string{`"allow"`}, "selected allow", 1},
		{"optionId object", []string{`{"optionId":"deny"}`}, "selected deny", 1},
		{"v1 true", []string{`true`}, "selected allow", 1},
		{"v1 false", []string{`false`}, "selected deny", 1},
		{"unknown then valid", []string{`"bogus"`, `"always"`}, "selected always", 2},
		{"never valid", []string{`"a"`, `42`, `{"x":1}`}, "cancelled", 3},
		{"rejected", []string{"reject"}, "cancelled", 1},
	}
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := &testTurn{text: "permission", sess: s}
			tt.answer = func(n int, _ json.RawMessage) (json.RawMessage, error) {
				a := tc.answers[n-1]
				if a == "reject" {
					return nil, &agent.RejectedError{SlotID: "slot_1", Reason: json.RawMessage(`"no"`)}
				}
				return json.RawMessage(a), nil
			}
			msg, err := c.Prompt(testkit.Context(t, "the prompt's answer"), tt)
			tt.finish()
			if err != nil {
				t.Fatalf("Prompt = %v", err)
			}
			if msg != tc.want {
				t.Errorf("agent saw %q, want %q", msg, tc.want)
			}
			if len(tt.asks) != tc.asks {
				t.Fatalf("slot pushed %d times, want %d", len(tt.asks), tc.asks)
			}
			var in struct {
				Renderer  string          `json:"renderer"`
				ToolName  string          `json:"toolName"`
				ToolInput json.RawMessage `json:"toolInput"`
				ToolCall  json.RawMessage `json:"toolCall"`
				Options   []permissionOption
				Error     string `json:"error"`
			}
			if err := json.Unmarshal(tt.asks[0], &in); err != nil {
				t.Fatal(err)
			}
			if in.Renderer != "permission_request" || in.ToolName != "rm -rf /work/tmp" || len(in.Options) != 3 || in.Error != "" {
				t.Errorf("slot input = %s", tt.asks[0])
			}
			jsonEqual(t, "toolInput", in.ToolInput, `{"path":"/work/tmp"}`)
			if tc.asks > 1 {
				_ = json.Unmarshal(tt.asks[1], &in)
				if !strings.Contains(in.Error, `"allow", "always", "deny"`) {
					t.Errorf("re-pushed slot error = %q, want it to list the optionIds", in.Error)
				}
			}
			// The tool call's event reached the client before the slot.
			if got := tt.types(); len(got) == 0 || !slicesContains(got, "tool_use") {
				t.Errorf("events %v, want a tool_use", got)
			}
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestPermissionCancelledByAbort(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	pid := c.pid()
	ctx, cancel := context.WithCancel(testkit.Context(t, "the prompt's answer"))
	asked := make(chan struct{})
	tt := &testTurn{text: "permission", sess: s}
	tt.answer = func(_ int, _ json.RawMessage) (json.RawMessage, error) {
		close(asked)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	go func() { <-asked; cancel() }()
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want context.Canceled", err)
	}
	// The agent answered session/cancel in time: same process, still usable.
	_, msg := mustPrompt(t, c, s, "echo still here")
	if msg != "still here" || c.pid() != pid {
		t.Errorf("after abort: message %q on pid %d, want \"still here\" on pid %d", msg, c.pid(), pid)
	}
}

func TestCancel(t *testing.T) {
	c, s, logs := open(t, sdkAgentSpec(t), nil)
	pid := c.pid()
	ctx, cancel := context.WithCancel(testkit.Context(t, "the prompt's answer"))
	tt := &testTurn{text: "wait", sess: s}
	tt.onEvent = func(typ string, _ json.RawMessage) {
		if typ == "text_delta" {
			cancel()
		}
	}
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want context.Canceled", err)
	}
	if !strings.Contains(logs.String(), "cancelled prompt answered") {
		t.Errorf("the agent's answer to session/cancel was not seen; logs:\n%s", logs)
	}
	_, msg := mustPrompt(t, c, s, "count")
	if msg != "2" || c.pid() != pid {
		t.Errorf("after cancel: count %q on pid %d, want \"2\" on pid %d", msg, c.pid(), pid)
	}
}

func TestCancelIgnoredKillsAgent(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), func(a *acpAgent) { a.cancelGrace = 200 * time.Millisecond })
	pid := c.pid()
	ctx, cancel := context.WithCancel(testkit.Context(t, "the prompt's answer"))
	tt := &testTurn{text: "hang", sess: s}
	// Cancel once the agent says it hangs: an update held over from
	// session/new may come first, before session/prompt is even sent.
	tt.onEvent = func(typ string, _ json.RawMessage) {
		if typ == "text_delta" {
			cancel()
		}
	}
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want context.Canceled", err)
	}
	if !gone(pid) {
		t.Errorf("the agent that ignored session/cancel still runs")
	}
	_, msg := mustPrompt(t, c, s, "count")
	if msg != "1" || c.pid() == pid {
		t.Errorf("after the kill: count %q on pid %d, want \"1\" on a new process", msg, c.pid())
	}
}

func TestAgentDiesMidPrompt(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	s.Preamble = "[Glovebox environment]"
	pid := c.pid()
	tt, _, err := prompt(t, c, s, "die")
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent {
		t.Fatalf("Prompt(die) = %v, want an AgentError", err)
	}
	if !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "next prompt starts a new agent") {
		t.Errorf("error %q does not say how the agent ended and what happens next", err)
	}
	if len(tt.ofType("text_delta")) != 1 {
		t.Errorf("events before the crash: %v, want the text_delta", tt.types())
	}
	tt, msg := mustPrompt(t, c, s, "inputs")
	if c.pid() == pid {
		t.Errorf("the next prompt ran on the dead process %d", pid)
	}
	var blocks []map[string]any
	_ = json.Unmarshal([]byte(msg), &blocks)
	if len(blocks) != 2 || blocks[0]["text"] != s.Preamble {
		t.Errorf("first prompt of the new process = %s, want the preamble again", msg)
	}
	// Updates sent after session/new of the new process reach this prompt.
	if len(tt.ofType("available_commands_update")) != 1 {
		t.Errorf("events %v, want the new process's available_commands_update", tt.types())
	}
}

func TestPromptContent(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	s.Preamble = "[Glovebox environment]\nWorking directory: /work"
	in := filepath.Join(s.Dirs.Input, "my file.pdf")
	if err := os.WriteFile(in, []byte("%PDF-1.4"), 0o644); err != nil {
		t.Fatal(err)
	}
	tt := &testTurn{
		text:   "inputs",
		sess:   s,
		skills: []agent.SkillResult{{Name: "workspace", Content: `{"work":[]}`}},
		inputs: []agent.Input{{Name: "my file.pdf", Path: in, Mime: "application/pdf", Size: 8}},
	}
	msg, err := c.Prompt(testkit.Context(t, "the prompt's answer"), tt)
	tt.finish()
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "prompt blocks", json.RawMessage(msg), fmt.Sprintf(`[
		{"type":"text","text":%q},
		{"type":"text","text":"[Skill: workspace]\n{\"work\":[]}"},
		{"type":"text","text":"inputs"},
		{"type":"resource_link","uri":%q,"name":"my file.pdf","mimeType":"application/pdf","size":8}]`,
		s.Preamble, "file://"+strings.ReplaceAll(in, " ", "%20")))

	_, msg = mustPrompt(t, c, s, "inputs")
	jsonEqual(t, "second prompt blocks", json.RawMessage(msg), `[{"type":"text","text":"inputs"}]`)
}

func TestEnvironmentAndStderr(t *testing.T) {
	c, s, logs := open(t, sdkAgentSpec(t), nil)
	_, msg := mustPrompt(t, c, s, "env")
	var env struct {
		Cwd, SessionCwd, Work, Input, Output, Extra string
	}
	if err := json.Unmarshal([]byte(msg), &env); err != nil {
		t.Fatal(err)
	}
	work, _ := filepath.EvalSymlinks(s.Dirs.Work)
	want := struct{ Cwd, SessionCwd, Work, Input, Output, Extra string }{work, s.Dirs.Work, s.Dirs.Work, s.Dirs.Input, s.Dirs.Output, "from-spec"}
	if diff := cmp.Diff(want, struct{ Cwd, SessionCwd, Work, Input, Output, Extra string }(env)); diff != "" {
		t.Errorf("agent environment (-want +got):\n%s", diff)
	}
	mustPrompt(t, c, s, "stderr a-line-for-the-log")
	// stderr is read on its own, so the line may land after the reply.
	logs.Until(t, 1, "line=a-line-for-the-log")
}

func TestFS(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	work := s.Dirs.Work
	if err := os.Symlink("/etc/hostname", filepath.Join(work, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "lines.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "lines.txt"), filepath.Join(work, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(s.Dirs.Output, "o.txt"), filepath.Join(work, "to-output")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big.txt"), bytes.Repeat([]byte("0123456789abcde\n"), 9<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prompt string
		want   string // the agent's reply, or its prefix when it ends in "…"
	}{
		{"read " + work + "/big.txt", "error -32602: " + work + "/big.txt: more than 8388608 bytes; read it in parts with line and limit"},
		{"read " + work + "/big.txt 589824 1", "0123456789abcde\n"},
		{"read " + work + "/fifo", "error -32602: " + work + "/fifo is not a regular file"},
		{"write " + work + "/fifo x", "error -32602: " + work + "/fifo is not a regular file"},
		{"write " + work + "/sub/dir/a.txt hello there", "written"},
		{"read " + work + "/sub/dir/a.txt", "hello there"},
		{"read " + work + "/lines.txt 2 2", "two\nthree\n"},
		{"read " + work + "/lines.txt 3", "three\nfour\n"},
		{"read " + work + "/abs-link 1 1", "one\n"},
		{"write " + work + "/to-output via link", "written"},
		{"read " + s.Dirs.Output + "/o.txt", "via link"},
		{"read /etc/passwd", "error -32602: path \"/etc/passwd\" is outside the session's directories…"},
		{"read " + work + "/../../../etc/passwd", "error -32602: path…"},
		{"read " + work + "/escape", "error -32602: path…"},
		{"write " + work + "/escape x", "error -32602: path…"},
		{"read relative.txt", "error -32602: path \"relative.txt\" is not absolute…"},
		{"read " + work + "/missing.txt", "error -32002: …"},
		{"read " + work, "error -32602: …"},
		{"write " + s.Dirs.Input + "/x.txt nope", "error -32602: the input directory…"},
	}
	for _, tc := range tests {
		_, msg := mustPrompt(t, c, s, tc.prompt)
		if p, ok := strings.CutSuffix(tc.want, "…"); ok {
			if !strings.HasPrefix(msg, p) {
				t.Errorf("%s: agent got %q, want a reply starting %q", tc.prompt, msg, p)
			}
		} else if msg != tc.want {
			t.Errorf("%s: agent got %q, want %q", tc.prompt, msg, tc.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "sub", "dir", "a.txt")); err != nil || string(b) != "hello there" {
		t.Errorf("written file = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dirs.Input, "x.txt")); err == nil {
		t.Errorf("a write into the read-only input directory went through")
	}
}

func TestTerminal(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	type result struct {
		Exit      exitStatusJSON
		Output    string
		Truncated bool
	}
	run := func(cmd string) result {
		t.Helper()
		_, msg := mustPrompt(t, c, s, cmd)
		var r result
		if err := json.Unmarshal([]byte(msg), &r); err != nil {
			t.Fatalf("%s: agent said %q", cmd, msg)
		}
		return r
	}
	r := run("term echo hi")
	if r.Exit.ExitCode == nil || *r.Exit.ExitCode != 0 || r.Output != "hi\n" || r.Truncated {
		t.Errorf("term echo hi = %+v", r)
	}
	r = run("term false")
	if r.Exit.ExitCode == nil || *r.Exit.ExitCode != 1 {
		t.Errorf("term false = %+v, want exit code 1", r)
	}
	r = run("term pwd")
	if work, _ := filepath.EvalSymlinks(s.Dirs.Work); r.Output != work+"\n" {
		t.Errorf("term pwd = %q, want the work directory", r.Output)
	}
	// outputByteLimit is 64: the tail is kept.
	r = run("term seq 1 100")
	if !r.Truncated || len(r.Output) > 64 || !strings.HasSuffix(r.Output, "99\n100\n") {
		t.Errorf("term seq 1 100 = %+v, want the last 64 bytes, truncated", r)
	}
	if _, msg := mustPrompt(t, c, s, "shell echo abc | tr a-c x-z"); msg != "xyz\n" {
		t.Errorf("a shell line as the command: agent got %q, want %q", msg, "xyz\n")
	}
	_, msg := mustPrompt(t, c, s, "termkill")
	if msg != `{"exit":{"exitCode":null,"signal":"SIGKILL"}}` {
		t.Errorf("termkill: agent got %s", msg)
	}
	_, msg = mustPrompt(t, c, s, "term /no/such/program")
	if !strings.HasPrefix(msg, "error -32603: start /no/such/program") {
		t.Errorf("term /no/such/program: agent got %s", msg)
	}
	// A terminal left running is killed on Close (checked by open's cleanup).
	_, msg = mustPrompt(t, c, s, "termleak")
	if !strings.HasPrefix(msg, "term_") {
		t.Errorf("termleak: agent got %s", msg)
	}
}

func TestCloseStopsEverything(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	mustPrompt(t, c, s, "termleak")
	pids := c.pids()
	if len(pids) != 2 {
		t.Fatalf("pids = %v, want the agent and one terminal", pids)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("process %d survived Close", pid)
		}
	}
	_, _, err := prompt(t, c, s, "echo late")
	var ae *agent.Error
	if !errors.As(err, &ae) || !errors.Is(err, errClosed) {
		t.Errorf("Prompt after Close = %v, want an AgentError wrapping errClosed", err)
	}
}

func TestConcurrentSessionsAreIsolated(t *testing.T) {
	spec := sdkAgentSpec(t)
	c1, s1, _ := open(t, spec, nil)
	c2, s2, _ := open(t, spec, nil)
	if c1.pid() == c2.pid() {
		t.Fatal("two sessions share one agent process")
	}
	var wg sync.WaitGroup
	msgs := make([]string, 2)
	for i, cs := range []struct {
		c *conversation
		s *agent.Session
	}{{c1, s1}, {c2, s2}} {
		wg.Go(func() {
			tt := &testTurn{text: fmt.Sprintf("echo session %d", i+1), sess: cs.s}
			msgs[i], _ = cs.c.Prompt(testkit.Context(t, "the prompt's answer"), tt)
			tt.finish()
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]string{"session 1", "session 2"}, msgs); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	// One session's crash leaves the other alone.
	if _, _, err := prompt(t, c1, s1, "die"); err == nil {
		t.Fatal("die: no error")
	}
	if _, msg := mustPrompt(t, c2, s2, "count"); msg != "2" {
		t.Errorf("the other session's agent restarted: count %q, want 2", msg)
	}
}

func TestProtocolViolations(t *testing.T) {
	c, s, logs := open(t, rawAgentSpec(t, nil), nil)
	pid := c.pid()
	tt, msg := mustPrompt(t, c, s, "garbage")
	jsonEqual(t, "reply to an unknown method", json.RawMessage(msg), `{"error":{"code":-32601,"message":"method not found: _vendor/method"}}`)
	jsonEqual(t, "unknown update", tt.ofType("_vendor_thing")[0], `{"x":1,"nested":{"y":[1,2]}}`)
	jsonEqual(t, "update without discriminator", tt.ofType("session_update")[0], `{"what":"no discriminator"}`)
	for _, want := range []string{"line is not a JSON-RPC message", "response to an id the kit never used", "unknown notification"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
	_, msg = mustPrompt(t, c, s, "crlf")
	if msg != "crlf ok" || c.pid() != pid {
		t.Errorf("crlf: %q on pid %d, want \"crlf ok\" on pid %d", msg, c.pid(), pid)
	}
}

func TestOversizedLine(t *testing.T) {
	c, s, _ := open(t, rawAgentSpec(t, nil), func(a *acpAgent) { a.maxLine = 1 << 20 })
	pid := c.pid()
	_, msg := mustPrompt(t, c, s, fmt.Sprintf("huge %d", 1<<19))
	if len(msg) != 1<<19 {
		t.Errorf("a line under the limit: message of %d bytes, want %d", len(msg), 1<<19)
	}
	_, _, err := prompt(t, c, s, fmt.Sprintf("huge %d", 2<<20))
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent || !strings.Contains(err.Error(), "longer than 1048576 bytes") {
		t.Fatalf("Prompt(huge) = %v, want an AgentError about the line's size", err)
	}
	if !gone(pid) {
		t.Errorf("the agent that broke the protocol still runs")
	}
	if _, msg := mustPrompt(t, c, s, "echo fine"); msg != "echo fine" {
		t.Errorf("after restart: %q", msg)
	}
}

func TestHandshakeFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"protocol version", map[string]string{"RAW_VERSION": "2"}, "speaks ACP protocol version 2; glovebox speaks 1"},
		{"authentication", map[string]string{"RAW_AUTH": "1"}, "requires authentication before session/new (auth methods api-key, raw-key (set RAW_KEY))"},
		{"env_var authentication without the variable", map[string]string{"RAW_AUTH": "envvar"}, "requires authentication before session/new (auth methods api-key, raw-key (set RAW_KEY))"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := testSession(t)
			a, err := New(rawAgentSpec(t, tc.env), s.Log)
			if err != nil {
				t.Fatal(err)
			}
			conv, err := a.Open(testkit.Context(t, "Open"), s)
			if err != nil {
				t.Fatalf("Open = %v", err)
			}
			defer conv.Close()
			tt := &testTurn{text: "hello", sess: s}
			_, err = conv.Prompt(testkit.Context(t, "the prompt's answer"), tt)
			var ae *agent.Error
			if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Prompt = %v, want an AgentError containing %q", err, tc.want)
			}
		})
	}
}

func TestTerminalCwd(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	out, _ := filepath.EvalSymlinks(s.Dirs.Output)
	tests := []struct{ cwd, want string }{
		{s.Dirs.Output, out + "\n"},
		{"/etc", "error -32602: path \"/etc\" is outside the session's directories"},
		{s.Dirs.Work + "/../..", "error -32602: path"},
		{"relative", "error -32602: path \"relative\" is not absolute"},
		{s.Dirs.Work + "/missing", "error -32002: "},
	}
	for _, tc := range tests {
		if _, msg := mustPrompt(t, c, s, "termcwd "+tc.cwd); !strings.HasPrefix(msg, tc.want) {
			t.Errorf("terminal with cwd %s: agent got %q, want %q...", tc.cwd, msg, tc.want)
		}
	}
}

// TestCloseKillsProcessGroup: an agent that ignores SIGTERM is killed
// after the grace, and so is what it started in its process group.
func TestCloseKillsProcessGroup(t *testing.T) {
	c, s, _ := open(t, rawAgentSpec(t, map[string]string{"RAW_IGNORE_TERM": "1"}), func(a *acpAgent) { a.stopGrace = 300 * time.Millisecond })
	agentPid := c.pid()
	_, msg := mustPrompt(t, c, s, "spawn")
	child, err := strconv.Atoi(msg)
	if err != nil {
		t.Fatalf("spawn: agent said %q", msg)
	}
	if gone(child) {
		t.Fatalf("child %d is not running", child)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{agentPid, child} {
		// init reaps the orphan in its own time.
		testkit.Until(t, fmt.Sprintf("process %d to end after Close", pid), func() bool { return gone(pid) })
	}
}

// TestInboundRequestsBounded: requests beyond the limit are refused with
// an error, not queued without bound; the others are served.
func TestInboundRequestsBounded(t *testing.T) {
	c, s, logs := open(t, rawAgentSpec(t, nil), func(a *acpAgent) { a.maxInbound = 4 })
	tt := &testTurn{text: "flood 6", sess: s}
	refused := testkit.Context(t, "two refusals in the log")
	tt.answer = func(int, json.RawMessage) (json.RawMessage, error) {
		// Hold every slot until both refusals are out.
		if err := logs.Wait(refused, 2, "too many requests in flight"); err != nil {
			return nil, err
		}
		return json.RawMessage(`"allow"`), nil
	}
	msg, err := c.Prompt(testkit.Context(t, "the prompt's answer"), tt)
	tt.finish()
	if err != nil {
		t.Fatal(err)
	}
	if msg != "refused=2 selected=4" {
		t.Errorf("flood 6 with a limit of 4: agent saw %q, want refused=2 selected=4", msg)
	}
}

// TestAgentStopsReading: a prompt that cannot be written because the agent
// no longer reads its stdin ends with the prompt's ctx, and the agent is
// replaced. The prompt is given up only once its first bytes sit in the
// agent's stdin pipe: a ctx that ended before the kit began to write (a
// fixed deadline does, when encoding 4 MiB under -race on a loaded
// machine is slow) leaves the agent untouched, by design, and the test
// would then prompt a deaf agent.
func TestAgentStopsReading(t *testing.T) {
	c, s, _ := open(t, rawAgentSpec(t, nil), nil)
	pid := c.pid()
	mustPrompt(t, c, s, "deaf")
	c.mu.Lock()
	stdin := c.proc.conn.w
	c.mu.Unlock()
	errGiveUp := errors.New("the test gave up on the prompt")
	ctx, cancel := context.WithCancelCause(testkit.Context(t, "the prompt to the deaf agent"))
	defer cancel(nil)
	tt := &testTurn{text: strings.Repeat("x", 4<<20), sess: s}
	done := make(chan error, 1)
	go func() {
		_, err := c.Prompt(ctx, tt)
		done <- err
	}()
	// The agent read every line before the prompt, so any byte in the pipe
	// is the prompt's, and 4 MiB cannot fit: the write is stuck.
	testkit.Until(t, "the prompt's first bytes in the deaf agent's stdin", func() bool { return pipeBytes(t, stdin) > 0 })
	cancel(errGiveUp)
	var err error
	select {
	case err = <-done:
	case <-testkit.Context(t, "Prompt to return after its ctx ended").Done():
		t.Fatal("Prompt did not return after its ctx ended")
	}
	tt.finish()
	if !errors.Is(err, errGiveUp) {
		t.Fatalf("Prompt to a deaf agent = %v, want the ctx's cause", err)
	}
	if !gone(pid) {
		t.Fatalf("the deaf agent %d still runs", pid)
	}
	if _, msg := mustPrompt(t, c, s, "echo back"); msg != "echo back" || c.pid() == pid {
		t.Errorf("after the deaf agent: %q on pid %d", msg, c.pid())
	}
}

// pipeBytes is how many bytes wait in the pipe f writes to (FIONREAD). It
// goes through SyscallConn, as f.Fd would make f blocking and its write
// deadlines void.
func pipeBytes(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatalf("FIONREAD on the agent's stdin: %v", errno)
	}
	return int(n)
}

// TestEnvVarAuthentication: an agent that lists an env_var auth method
// whose variables are set is told to authenticate with it.
func TestEnvVarAuthentication(t *testing.T) {
	c, s, logs := open(t, rawAgentSpec(t, map[string]string{"RAW_AUTH": "envvar", "RAW_KEY": "secret"}), nil)
	if _, msg := mustPrompt(t, c, s, "echo in"); msg != "echo in" {
		t.Errorf("prompt after authenticate: %q", msg)
	}
	if !strings.Contains(logs.String(), "method=raw-key") {
		t.Errorf("no authenticate with raw-key in the log:\n%s", logs)
	}
}

// TestPromptAlreadyCancelled: a prompt whose ctx ended before it started
// costs the agent nothing.
func TestPromptAlreadyCancelled(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	pid := c.pid()
	ctx, cancel := context.WithCancel(testkit.Context(t, "the prompt's answer"))
	cancel()
	tt := &testTurn{text: "echo never", sess: s}
	if _, err := c.Prompt(ctx, tt); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt(cancelled ctx) = %v, want context.Canceled", err)
	}
	tt.finish()
	if _, msg := mustPrompt(t, c, s, "count"); c.pid() != pid || msg != "1" {
		t.Errorf("after a cancelled prompt: count %q on pid %d, want the same process %d", msg, c.pid(), pid)
	}
}

// TestFindCommandInAgentPath: the agent's command is looked up in the PATH
// the agent gets (gbx dev's tools, the image's /bin), not the kit's own.
func TestFindCommandInAgentPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "only-in-agent-path"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=/nowhere", "PATH=/usr/bin:" + dir}
	if err := findCommand("only-in-agent-path", env); err != nil {
		t.Errorf("findCommand in the agent's PATH: %v", err)
	}
	if err := findCommand("only-in-agent-path", []string{"PATH=/usr/bin"}); !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "not in the agent's PATH /usr/bin") {
		t.Errorf("findCommand outside the agent's PATH = %v", err)
	}
	if err := findCommand(filepath.Join(dir, "only-in-agent-path"), nil); err != nil {
		t.Errorf("findCommand by path: %v", err)
	}
}
