package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

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
