package kit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestV1Client drives every client message type as a v1 client would.
func TestV1Client(t *testing.T) {
	started := make(chan string, 64) // more than the prompts below
	b := newBox(t, scripted(started))
	c := b.dial("/run", nil)
	if c.hello["session_id"] == "" || c.hello["protocol_version"] != 1.0 {
		t.Errorf("hello = %v", c.hello)
	}

	// ping -> pong echoing ts verbatim.
	c.sendRaw(`{"type":"ping","ts":1732180535000}`)
	if m := c.next(); m["type"] != "pong" || m["ts"] != 1732180535000.0 {
		t.Errorf("pong = %v", m)
	}

	// prompt -> event then complete, in order, numbered.
	c.prompt("req_1", "echo hello world")
	fs := c.finish("req_1")
	if len(fs) != 2 || fs[0]["type"] != "event" || fs[0]["event_type"] != "text_delta" || fs[0]["id"] != "req_1" {
		t.Fatalf("frames = %v", fs)
	}
	if d, _ := fs[0]["data"].(map[string]any); d["text"] != "hello world" {
		t.Errorf("event data = %v", fs[0]["data"])
	}
	done := fs[1]
	if done["type"] != "complete" || done["message"] != "hello world" {
		t.Errorf("complete = %v", done)
	}
	if outs, ok := done["outputs"].(map[string]any); !ok || len(outs) != 0 {
		t.Errorf("outputs = %v, want {}", done["outputs"])
	}
	if fs[0]["seq"] != 1.0 || done["seq"] != 2.0 {
		t.Errorf("seq = %v, %v, want 1, 2", fs[0]["seq"], done["seq"])
	}

	// display_resolve.
	c.prompt("req_2", "ask")
	push := c.next()
	slot, _ := push["slot"].(map[string]any)
	if push["type"] != "display_push" || slot["renderer"] != "confirm" || !strings.HasPrefix(slot["id"].(string), "slot_") {
		t.Fatalf("display_push = %v", push)
	}
	c.send(map[string]any{"type": "display_resolve", "slot_id": slot["id"], "value": map[string]any{"yes": true}})
	fs = c.finish("req_2")
	if fs[0]["type"] != "display_clear" || fs[0]["slot_id"] != slot["id"] {
		t.Errorf("after resolve: %v, want display_clear first", fs)
	}
	if m := last(fs); m["type"] != "complete" || m["message"] != `{"yes":true}` {
		t.Errorf("complete = %v", m)
	}

	// display_reject.
	c.prompt("req_3", "ask")
	push = c.next()
	slot, _ = push["slot"].(map[string]any)
	c.send(map[string]any{"type": "display_reject", "slot_id": slot["id"], "error": "user cancelled"})
	fs = c.finish("req_3")
	if m := last(fs); m["type"] != "error" || errCode(m) != protocol.CodeAgent || !strings.Contains(fmt.Sprint(m["error"]), "rejected") {
		t.Errorf("after reject: %v", m)
	}

	// abort of the running prompt.
	c.prompt("req_4", "block")
	for testkit.Recv(t, started, "req_4 to start") != "req_4" {
	}
	c.send(map[string]any{"type": "abort", "id": "req_4"})
	if m := last(c.finish("req_4")); errCode(m) != "AbortError" {
		t.Errorf("abort: %v", m)
	}

	// malformed frames are answered and the connection stays.
	c.sendRaw(`{"type":"prompt","id":"req_5","text":42}`)
	if m := c.next(); m["type"] != "error" || m["id"] != "req_5" || errCode(m) != "TypeError" {
		t.Errorf("mistyped prompt: %v", m)
	}
	c.sendRaw(`not json`)
	if m := c.next(); m["type"] != "error" || m["id"] != "" || errCode(m) != "TypeError" {
		t.Errorf("bad json: %v", m)
	}
	// unknown types are ignored.
	c.sendRaw(`{"type":"future_thing","id":"x"}`)
	c.prompt("req_6", "echo still here")
	if m := last(c.finish("req_6")); m["type"] != "complete" || m["message"] != "still here" {
		t.Errorf("after unknown type: %v", m)
	}
}

func TestAbortQueued(t *testing.T) {
	started := make(chan string, 10)
	b := newBox(t, scripted(started))
	c := b.dial("/", nil)
	c.prompt("a", "block")
	if id := <-started; id != "a" {
		t.Fatalf("started %s", id)
	}
	c.prompt("b", "echo b")
	c.prompt("c", "echo c")
	c.send(map[string]any{"type": "abort", "id": "b"})
	if m := c.next(); m["type"] != "error" || m["id"] != "b" || errCode(m) != "AbortError" {
		t.Fatalf("abort of queued b: %v", m)
	}
	c.send(map[string]any{"type": "abort", "id": "a"})
	if m := c.next(); m["id"] != "a" || errCode(m) != "AbortError" {
		t.Fatalf("abort of running a: %v", m)
	}
	fs := c.finish("c")
	if m := last(fs); m["type"] != "complete" || m["message"] != "c" {
		t.Fatalf("c: %v", fs)
	}
	if id := <-started; id != "c" {
		t.Errorf("after a, %s ran; want c (b was aborted)", id)
	}
	select {
	case id := <-started:
		t.Errorf("%s ran too", id)
	default:
	}
}

func TestQueueLimitsAndDuplicates(t *testing.T) {
	started := make(chan string, 10)
	b := newBox(t, scripted(started), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{MaxQueue: 2}
	})
	c := b.dial("/", nil)
	c.prompt("a", "block")
	testkit.Recv(t, started, "the agent to start the first prompt")
	c.prompt("a", "echo dup")
	if m := c.next(); m["id"] != "a" || errCode(m) != protocol.CodeDuplicateID {
		t.Fatalf("duplicate: %v", m)
	}
	c.prompt("b", "echo b")
	c.prompt("c", "echo c")
	c.prompt("d", "echo d")
	if m := c.next(); m["id"] != "d" || errCode(m) != protocol.CodeQueueFull {
		t.Fatalf("queue full: %v", m)
	}
	c.send(map[string]any{"type": "abort", "id": "a"})
	c.finish("c")
}

func TestTimeout(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) { m.Limits.Timeout = "50ms" })
	c := b.dial("/", nil)
	c.prompt("slow", "block")
	m := last(c.finish("slow"))
	if errCode(m) != protocol.CodeTimeout || !strings.Contains(fmt.Sprint(m["error"]), "50ms") {
		t.Errorf("timeout: %v", m)
	}
}

// TestCloseCancels checks that closing the socket cancels the running
// prompt and the queue, and ends the session.
func TestCloseCancels(t *testing.T) {
	started := make(chan string, 10)
	var cancelled atomic.Int32
	ag := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		started <- turn.ID()
		<-ctx.Done()
		cancelled.Add(1)
		return "", ctx.Err()
	})
	b := newBox(t, ag)
	c := b.dial("/", nil)
	c.prompt("a", "x")
	c.prompt("b", "x")
	testkit.Recv(t, started, "the agent to start the first prompt")
	c.close()
	waitFor(t, "session to end", func() bool { return b.srv.sessionCount() == 0 })
	if cancelled.Load() != 1 {
		t.Errorf("cancelled %d prompts, want the running one", cancelled.Load())
	}
	select {
	case id := <-started:
		t.Errorf("queued prompt %s ran after the socket closed", id)
	default:
	}
}

func TestEventsPrecedeCompleteUnderLoad(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	const n = 5000
	for round := 0; round < 3; round++ {
		id := "load_" + strconv.Itoa(round)
		c.prompt(id, "events "+strconv.Itoa(n))
		fs := c.finish(id)
		if len(fs) != n+1 {
			t.Fatalf("round %d: %d frames, want %d events then complete", round, len(fs), n+1)
		}
		for i, f := range fs[:n] {
			d, _ := f["data"].(map[string]any)
			if f["type"] != "event" || d["text"] != strconv.Itoa(i) {
				t.Fatalf("round %d: frame %d = %v", round, i, f)
			}
		}
		prev := 0.0
		for _, f := range fs {
			if s := f["seq"].(float64); s != prev+1 && prev != 0 {
				t.Fatalf("seq jumps from %v to %v", prev, s)
			}
			prev = f["seq"].(float64)
		}
	}
}

func TestSessionIsolation(t *testing.T) {
	b := newBox(t, scripted(nil))
	c1 := b.dial("/", nil)
	c2 := b.dial("/", nil)
	if c1.hello["session_id"] == c2.hello["session_id"] {
		t.Fatal("two connections share a session id")
	}
	c1.prompt("p", "ask")
	push := c1.next()
	slot := push["slot"].(map[string]any)["id"]
	// c2 cannot answer c1's slot.
	c2.send(map[string]any{"type": "display_resolve", "slot_id": slot, "value": "from c2"})
	c2.prompt("q", "env GLOVEBOX_WORK")
	fs2 := c2.finish("q")
	for _, f := range fs2 {
		if f["type"] != "complete" {
			t.Errorf("c2 saw %v", f)
		}
	}
	c1.send(map[string]any{"type": "display_resolve", "slot_id": slot, "value": "from c1"})
	fs1 := c1.finish("p")
	if m := last(fs1); m["message"] != `"from c1"` {
		t.Errorf("c1's slot answered with %v", m["message"])
	}
	c1.prompt("w", "env GLOVEBOX_WORK")
	w1 := last(c1.finish("w"))["message"].(string)
	w2 := last(fs2)["message"].(string)
	if w1 == w2 || !strings.HasSuffix(w1, c1.hello["session_id"].(string)) {
		t.Errorf("work dirs %q and %q: want one per session", w1, w2)
	}
}

// TestShowSlotsClearedAtEnd checks that a slot left by a prompt is cleared
// when the prompt ends, before its complete.
func TestShowSlotsClearedAtEnd(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	c.prompt("s", "show")
	fs := c.finish("s")
	if len(fs) != 3 || fs[0]["type"] != "display_push" || fs[1]["type"] != "display_clear" || fs[2]["type"] != "complete" {
		t.Fatalf("frames = %v", fs)
	}
}

func TestResume(t *testing.T) {
	release := make(chan struct{})
	ag := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		turn.Emit("text_delta", map[string]string{"text": "before"})
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		for i := 0; i < 3; i++ {
			turn.Emit("text_delta", map[string]string{"text": "after " + strconv.Itoa(i)})
		}
		return "resumed fine", nil
	})
	b := newBox(t, ag)
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("r", "go")
	first := c.next()
	if first["seq"] != 1.0 {
		t.Fatalf("first frame = %v", first)
	}
	c.drop()
	close(release)
	// The prompt goes on while detached; its frames wait in the buffer.
	c2 := b.dial("/?resume="+sid+"&last_seq=1", nil)
	if c2.hello["resumed"] != true || c2.hello["session_id"] != sid {
		t.Fatalf("resume hello = %v, then %v", c2.hello, c2.next())
	}
	fs := c2.finish("r")
	if len(fs) != 4 || fs[0]["seq"] != 2.0 || last(fs)["message"] != "resumed fine" {
		t.Fatalf("replayed frames = %v", fs)
	}

	// An unknown session gives a fresh one and ResumeFailed.
	c3 := b.dial("/?resume=nope&last_seq=3", nil)
	if c3.hello["resumed"] == true || c3.hello["session_id"] == "nope" {
		t.Errorf("hello = %v", c3.hello)
	}
	if m := c3.next(); errCode(m) != protocol.CodeResumeFailed || m["id"] != "" {
		t.Errorf("resume of an unknown session: %v", m)
	}

	// A v1 client's session cannot be resumed: dropping it ends it.
	c4 := b.dial("/", nil)
	sid4 := c4.hello["session_id"].(string)
	c4.drop()
	waitFor(t, "v1 session to end", func() bool { return b.srv.lookup(sid4) == nil })
}

func TestResumeGraceExpires(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{ResumeGrace: "30ms"}
	})
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	c.prompt("x", "echo x") // the hello has been read once this completes
	c.finish("x")
	sid := c.hello["session_id"].(string)
	c.drop()
	waitFor(t, "grace to expire", func() bool { return b.srv.lookup(sid) == nil })
	c2 := b.dial("/?resume="+sid+"&last_seq=2", nil)
	if m := c2.next(); errCode(m) != protocol.CodeResumeFailed {
		t.Errorf("resume after grace: %v", m)
	}
}

func TestMaxSessions(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{Max: 1}
	})
	b.dial("/", nil)
	_, resp, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+"/", wsconn.DialOptions{Header: b.auth()})
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("second session: %v, want 503", err)
	}
}

// TestCloseGoingAway checks that Close cancels prompts, says so, and sends
// a close frame 1001.
func TestCloseGoingAway(t *testing.T) {
	started := make(chan string, 1)
	b := newBox(t, scripted(started))
	c := b.dial("/", nil)
	c.prompt("a", "block")
	testkit.Recv(t, started, "the agent to start the first prompt")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if m := c.next(); m["id"] != "a" || errCode(m) != "AbortError" {
		t.Errorf("running prompt at Close: %v", m)
	}
	testkit.Wait(t, c.done, "the kit to close the socket at Close")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Until(t, what, cond)
}

var _ = json.Marshal

// TestKeepalive checks that pings keep a live client connected and that a
// silent one is dropped.
func TestKeepalive(t *testing.T) {
	// The interval leaves a loaded machine's scheduler room: a client is
	// dropped after two intervals without a pong.
	const interval = 300 * time.Millisecond
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.PingInterval = interval })
	live := b.dial("/", nil) // its reader answers pings
	// A client that never reads never answers a ping.
	silent, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+"/", wsconn.DialOptions{Header: b.auth()})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitFor(t, "the silent client to be dropped", func() bool { return b.srv.sessionCount() == 1 })
	// Real time is the subject: the live client must answer the kit's
	// pings over several intervals of its timer (on real sockets, which
	// testing/synctest cannot hold still).
	time.Sleep(5 * interval)
	live.prompt("p", "echo alive")
	if m := last(live.finish("p")); m["message"] != "alive" {
		t.Errorf("live client after pings: %v", m)
	}
}

// TestAgentMisbehaves checks that a panicking agent fails its prompt, not
// the box, and that Emit after the prompt ended fails.
func TestAgentMisbehaves(t *testing.T) {
	late := make(chan error, 1)
	ended := make(chan struct{}) // closed once the test has read the late prompt's end
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { close(ended) }) }
	t.Cleanup(end)
	ag := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		switch turn.Text() {
		case "panic":
			panic("boom")
		case "late":
			go func() {
				<-ended
				late <- turn.Emit("text_delta", map[string]string{"text": "too late"})
			}()
		case "badraw":
			return "", turn.Emit("x", json.RawMessage(`{"unterminated`))
		}
		return "ok", nil
	})
	b := newBox(t, ag)
	c := b.dial("/", nil)
	c.prompt("p", "panic")
	if m := last(c.finish("p")); errCode(m) != protocol.CodeAgent || !strings.Contains(fmt.Sprint(m["error"]), "boom") {
		t.Errorf("panic: %v", m)
	}
	c.prompt("l", "late")
	c.finish("l")
	end()
	if err := testkit.Recv(t, late, "the late Emit's result"); !errors.Is(err, agent.ErrTurnDone) {
		t.Errorf("Emit after the prompt = %v, want ErrTurnDone", err)
	}
	c.prompt("r", "badraw")
	if m := last(c.finish("r")); m["type"] != "error" {
		t.Errorf("invalid raw data: %v", m)
	}
	c.prompt("ok", "fine")
	if m := last(c.finish("ok")); m["message"] != "ok" {
		t.Errorf("after: %v", m)
	}
}

// TestResumeMidFlood drops the socket while a prompt streams events and
// checks that the resumed client gets every event it missed, in order.
func TestResumeMidFlood(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("f", "events 3000")
	var lastSeq float64
	for i := 0; i < 10; i++ {
		lastSeq = c.next()["seq"].(float64)
	}
	c.drop()
	c2 := b.dial("/?resume="+sid+"&last_seq="+strconv.Itoa(int(lastSeq)), nil)
	if c2.hello["resumed"] != true {
		t.Fatalf("hello = %v, then %v", c2.hello, c2.next())
	}
	fs := c2.finish("f")
	if len(fs) != 3000-10+1 {
		t.Fatalf("got %d frames after resume, want %d", len(fs), 3000-10+1)
	}
	for i, f := range fs {
		if f["seq"].(float64) != lastSeq+float64(i)+1 {
			t.Fatalf("frame %d has seq %v, want %v", i, f["seq"], lastSeq+float64(i)+1)
		}
	}
	for i, f := range fs[:len(fs)-1] {
		if d := f["data"].(map[string]any); d["text"] != strconv.Itoa(10+i) {
			t.Fatalf("event %d = %v", i, d)
		}
	}
}

func TestMaxMessage(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxMessage = "1KB" })
	c := b.dial("/", nil)
	c.prompt("big", strings.Repeat("x", 2048))
	select {
	case m, ok := <-c.frames:
		if ok {
			t.Fatalf("after an oversized frame: %v, want the connection closed", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("connection not closed")
	}
	waitFor(t, "session end", func() bool { return b.srv.sessionCount() == 0 })
}
