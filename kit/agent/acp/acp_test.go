package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

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
	spec := sdkAgentSpec(t)
	spec.Env["ACP_TEST_LOAD"] = "0" // an agent that cannot load: a new session
	c, s, _ := open(t, spec, nil)
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

// An agent that can load sessions (loadSession) continues the
// conversation in the process that replaces one that died: session/load
// of the same ACP session, whose replayed history is not the next
// prompt's events.
func TestAgentDiesAndItsSessionIsLoaded(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	mustPrompt(t, c, s, "echo before")
	first := c.AgentSession()
	if _, _, err := prompt(t, c, s, "die"); err == nil {
		t.Fatal("Prompt(die) succeeded")
	}
	tt, msg := mustPrompt(t, c, s, "history")
	if msg != `["echo before","die","history"]` {
		t.Errorf("history on the new process = %s, want the conversation continued", msg)
	}
	for _, e := range tt.ofType("text_delta") {
		if strings.Contains(fmt.Sprint(e), "replayed") {
			t.Errorf("the loaded session's replayed history reached the prompt: %v", e)
		}
	}
	if c.AgentSession() != first {
		t.Errorf("AgentSession = %q after the load, want %q", c.AgentSession(), first)
	}
}

// A conversation opened with agent.Session.Resume (a persistent session
// after the kit restarted) loads that ACP session.
func TestResumeLoadsTheSession(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	mustPrompt(t, c, s, "echo remembered")
	id := c.AgentSession()
	c.Close()

	a, err := New(sdkAgentSpec(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s2 := *s
	s2.Resume = id
	conv, err := a.Open(t.Context(), &s2)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Close()
	_, msg := mustPrompt(t, conv.(*conversation), &s2, "history")
	if msg != `["echo remembered","history"]` {
		t.Errorf("history after the resume = %s, want the earlier prompt", msg)
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
