package kit

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A session waiting for a resume is paused once sessions.pause has
// passed with no prompt; a resume wakes it and its next prompt runs.
func TestDetachedSessionIsPausedAndWokenByAResume(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{ResumeGrace: "1h", Pause: "100ms"}
	})
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("1", "echo before")
	if m := last(c.finish("1")); m["type"] != "complete" {
		t.Fatalf("first prompt: %v", m)
	}
	ss := b.srv.live.lookup(sid)
	box := ss.obs.box.Load()
	if box == nil {
		t.Fatal("the session has no sandbox after a prompt")
	}
	c.drop()
	if !b.srv.sb.Report().Has(sandbox.LayerCgroup) {
		t.Skip("no cgroup freezer here: the session keeps running (tested in kit/sandbox)")
	}
	waitFor(t, "the detached session to be paused", box.Paused)
	if _, body := b.get("/sessions", b.auth()); !strings.Contains(string(body), `"state":"paused"`) {
		t.Errorf("GET /sessions = %s, want the session paused", body)
	}
	if row := (inspectedSession{ss}).Row(); !row.Paused || row.Connected {
		t.Errorf("the inspector's row = paused %v connected %v, want paused", row.Paused, row.Connected)
	}
	if _, body := b.get("/metrics", b.auth()); !strings.Contains(string(body), "glovebox_session_pauses_total 1") {
		t.Errorf("/metrics does not count the pause")
	}
	c2 := b.dial("/?resume="+sid+"&last_seq=0", nil)
	if c2.hello["resumed"] != true {
		t.Fatalf("resume: %v", c2.hello)
	}
	if box.Paused() {
		t.Fatal("the session is still paused after its client resumed it")
	}
	c2.prompt("2", "echo after")
	for _, m := range c2.finish("2") {
		if m["type"] == "error" {
			t.Fatalf("the prompt after the resume: %v", m)
		}
	}
}

// A prompt that runs while the client is away is not paused under it.
func TestPauseWaitsForTheRunningPrompt(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{ResumeGrace: "1h", Pause: "50ms"}
	})
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("1", "sleep 1; echo done")
	ss := b.srv.live.lookup(sid)
	waitFor(t, "the prompt to run", func() bool { _, p := ss.prompts.load(); return p != nil })
	c.drop()
	waitFor(t, "the prompt to end", func() bool { q, p := ss.prompts.load(); return q == 0 && p == nil })
	box := ss.obs.box.Load()
	if b.srv.sb.Report().Has(sandbox.LayerCgroup) {
		waitFor(t, "the session to be paused after its prompt", box.Paused)
	}
	c2 := b.dial("/?resume="+sid+"&last_seq=0", nil)
	frames := c2.until(func(m map[string]any) bool { return m["type"] == "complete" || m["type"] == "error" })
	if m := last(frames); m["type"] != "complete" || !strings.Contains(m["message"].(string), "done") {
		t.Fatalf("the prompt that ran while the client was away: %v", m)
	}
}

// sessions.lifetime ends a session, telling its client why.
func TestLifetimeEndsTheSession(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{Lifetime: "300ms"}
	})
	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	m := c.next()
	if e, _ := m["error"].(map[string]any); errCode(m) != protocol.CodeLimit || !strings.Contains(e["message"].(string), "lifetime") {
		t.Fatalf("frame = %v, want a LimitError naming the lifetime", m)
	}
	waitFor(t, "the session to end", func() bool { return b.srv.live.lookup(sid) == nil })
}

// A request to one of the session's own features keeps it from being
// paused while it lasts, and wakes a paused one.
func TestPauseSparesASessionInUseAndItsRoutesWakeIt(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{ResumeGrace: "1h", Pause: "100ms"}
	})
	if !b.srv.sb.Report().Has(sandbox.LayerCgroup) {
		t.Skip("no cgroup freezer here")
	}
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("1", "echo hi")
	c.finish("1")
	ss := b.srv.live.lookup(sid)
	box := ss.obs.box.Load()
	release := ss.inUse() // a terminal's WebSocket, say
	c.drop()
	time.Sleep(400 * time.Millisecond) // four times sessions.pause
	if box.Paused() {
		t.Fatal("a session in use was paused")
	}
	release()
	waitFor(t, "the session to be paused once no longer in use", box.Paused)
	if resp, body := b.get("/sessions/"+sid+"/processes", b.auth()); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET processes = %d %s", resp.StatusCode, body)
	}
	if box.Paused() {
		t.Error("a request to the session's own route left it paused")
	}
}
