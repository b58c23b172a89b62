package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/acp/internal/testagents"
	"github.com/glovebox-dev/glovebox/protocol"
)

// realStart bounds a real agent CLI's handshake in these tests: node's cold
// start of a large CLI (tens of megabytes of JavaScript) on a loaded fresh
// machine takes far more than testkit.Timeout. It is above the kit's own
// handshakeTimeout, so an agent that really hangs fails with the kit's
// error naming initialize and session/new; this is the backstop.
const realStart = handshakeTimeout + 30*time.Second

// realPrompt bounds a real agent's offline prompt, which ends without the
// network (an authentication error, or the test's abort).
const realPrompt = 2 * time.Minute

// promptCtx is a context for a real agent's prompt that ends after
// realPrompt, its cause naming what the test waited for.
func promptCtx(t *testing.T, what string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(context.Background(), realPrompt, fmt.Errorf("gave up after %v waiting for %s", realPrompt, what))
}

// realAgent is the path of an agent CLI installed from npm in
// testdata/realagents, or a skip (a failure when CI is set).
func realAgent(t *testing.T, bin string) string {
	t.Helper()
	needNode(t)
	return filepath.Join(testagents.Dir(t, "realagents"), "node_modules", ".bin", bin)
}

// TestRealClaudeCodeACP boxes Zed's Claude Code adapter. Offline and
// without credentials it completes initialize and session/new; its first
// prompt must fail with a clear authentication error, and the commands it
// announced after session/new must reach that prompt's events.
func TestRealClaudeCodeACP(t *testing.T) {
	bin := realAgent(t, "claude-code-acp")
	spec := &protocol.AgentSpec{Type: protocol.AgentACP, Command: []string{bin}, Env: map[string]string{
		"HOME":              t.TempDir(),
		"IS_SANDBOX":        "1", // Claude Code refuses to skip its own permission prompts as root otherwise
		"ANTHROPIC_API_KEY": "",
	}}
	c, s, _ := openWithin(t, spec, nil, realStart, "Claude Code's handshake (node starting the CLI, then initialize and session/new)")
	// A bound in case a future version waits on the network instead.
	ctx, cancel := promptCtx(t, "Claude Code's answer to the first prompt (an authentication error)")
	defer cancel()
	tt := &testTurn{text: "Say hello.", sess: s}
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent || !strings.Contains(err.Error(), "requires authentication (auth methods claude-login)") {
		t.Fatalf("Prompt = %v (%v), want an AgentError naming the auth method", err, context.Cause(ctx))
	}
	if len(tt.ofType("available_commands_update")) == 0 {
		t.Errorf("events %v, want the available_commands_update sent after session/new", tt.types())
	}
}

// TestRealGeminiCLI boxes Gemini CLI in ACP mode with a key that is never
// checked offline: the handshake completes, the prompt waits on a network
// that is not there, the abort's session/cancel goes unanswered within the
// grace, so the kit stops the process and the next use starts a new one.
func TestRealGeminiCLI(t *testing.T) {
	bin := realAgent(t, "gemini")
	spec := &protocol.AgentSpec{Type: protocol.AgentACP, Command: []string{bin, "--experimental-acp"}, Env: map[string]string{
		"HOME":           t.TempDir(),
		"GEMINI_API_KEY": "offline-test-key",
	}}
	c, s, logs := openWithin(t, spec, func(a *acpAgent) { a.cancelGrace = time.Second }, realStart, "Gemini CLI's handshake (node starting the CLI, then initialize and session/new)")
	pid := c.pid()

	// The abort comes from a timeout; nothing asserts how long anything takes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tt := &testTurn{text: "Say hello.", sess: s}
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Prompt = %v, want the context's deadline", err)
	}
	alive := syscall.Kill(pid, 0) == nil
	answered := strings.Contains(logs.String(), "cancelled prompt answered")
	if alive != answered {
		t.Errorf("after session/cancel: process alive %v, cancel answered %v; want a live process only if it answered", alive, answered)
	}
	rctx, rcancel := context.WithTimeoutCause(context.Background(), realStart, fmt.Errorf("gave up after %v waiting for Gemini CLI's restart and handshake", realStart))
	defer rcancel()
	p, err := c.ensure(rctx)
	if err != nil {
		t.Fatalf("restart: %v (%v)", err, context.Cause(rctx))
	}
	if !alive && p.sp.Pid() == pid {
		t.Errorf("the stopped agent %d was not replaced", pid)
	}
}

// TestRealCodexACP boxes Zed's Codex adapter. Its session/new demands
// authentication; it lists OPENAI_API_KEY as an env_var auth method, so
// with that variable set the kit authenticates and the handshake
// completes offline. The prompt then streams Codex's notice about the
// network it cannot reach; the test aborts it there.
func TestRealCodexACP(t *testing.T) {
	bin := realAgent(t, "codex-acp")
	home := t.TempDir()
	spec := &protocol.AgentSpec{Type: protocol.AgentACP, Command: []string{bin}, Env: map[string]string{
		"HOME":           home,
		"CODEX_HOME":     home,
		"CODEX_API_KEY":  "",
		"OPENAI_API_KEY": "sk-offline-test",
	}}
	c, s, logs := openWithin(t, spec, func(a *acpAgent) { a.cancelGrace = 2 * time.Second }, realStart, "Codex's handshake (the adapter starting, then initialize, authenticate and session/new)")
	if !strings.Contains(logs.String(), "method=openai-api-key") {
		t.Errorf("the kit did not authenticate with openai-api-key:\n%s", logs)
	}
	ctx, cancel := promptCtx(t, "Codex's first text_delta or its error without the network") // a bound, not an assertion
	defer cancel()
	tt := &testTurn{text: "Say hello.", sess: s}
	tt.onEvent = func(typ string, _ json.RawMessage) {
		if typ == "text_delta" {
			cancel()
		}
	}
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	if err == nil {
		t.Fatal("Prompt with no network succeeded")
	}
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// Codex gave up on the network before it said anything.
		var ae *agent.Error
		if !errors.As(err, &ae) || ae.Code != protocol.CodeAgent {
			t.Fatalf("Prompt = %v (%v), want the abort or an AgentError", err, context.Cause(ctx))
		}
	}
	if len(tt.ofType("available_commands_update")) == 0 {
		t.Errorf("events %v, want Codex's available_commands_update", tt.types())
	}
}
