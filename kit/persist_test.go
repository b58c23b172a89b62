package kit

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// restart stops b's kit as SIGTERM would (Close) and serves a new kit on
// the same root, key and manifest.
func restart(t *testing.T, b *box) *box {
	t.Helper()
	if err := b.srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return reboot(t, b)
}

// reboot serves a new kit on b's root, key and manifest, whatever became
// of b's.
func reboot(t *testing.T, b *box) *box {
	t.Helper()
	o := b.srv.opts
	o.Logger = testLogger(t)
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() {
		srv.Close(t.Context())
		hs.Close()
	})
	return &box{t: t, srv: srv, key: b.key, root: b.root, url: "http://" + ln.Addr().String(), man: b.man}
}

func persistBox(t *testing.T) *box {
	return newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{Persist: true, ResumeGrace: "1h"}
	})
}

// A persistent session outlives the kit: after a restart its owner
// resumes it by id, its files are there, the prompt the stop cut is
// reported, and it goes on.
func TestPersistentSessionSurvivesARestart(t *testing.T) {
	b := persistBox(t)
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("1", "echo kept > note.txt && echo written")
	done := c.finish("1")
	lastSeq := last(done)["seq"].(float64)
	c.prompt("2", "sleep 60")
	ss := b.srv.live.lookup(sid)
	waitFor(t, "the second prompt to run", func() bool { _, p := ss.prompts.load(); return p != nil })

	b2 := restart(t, b)
	if _, body := b2.get("/sessions", b2.auth()); !strings.Contains(string(body), sid) || !strings.Contains(string(body), `"persistent":true`) {
		t.Fatalf("after the restart GET /sessions = %s, want session %s", body, sid)
	}
	if row := (inspectedSession{b2.srv.live.lookup(sid)}).Row(); !row.Persistent {
		t.Error("the inspector does not show the session persistent")
	}
	// Another credential cannot take it.
	tok := b2.token(protocol.ScopeConnect)
	other := b2.dial("/?resume="+sid+"&last_seq=0", bearer(tok))
	if other.hello["session_id"] == sid {
		t.Fatal("another credential resumed the persistent session")
	}
	other.close()

	c2 := b2.dial("/?resume="+sid+"&last_seq="+ftoa(lastSeq), nil)
	if c2.hello["resumed"] != true || c2.hello["restarted"] != true || c2.hello["session_id"] != sid {
		t.Fatalf("resume after the restart: hello %v", c2.hello)
	}
	if m := c2.next(); m["type"] != "error" || m["id"] != "2" || !strings.Contains(m["error"].(map[string]any)["message"].(string), "restarted") {
		t.Fatalf("first frame after the resume = %v, want the cut prompt's error", m)
	}
	c2.prompt("3", "cat note.txt")
	m := last(c2.finish("3"))
	if m["type"] != "complete" || !strings.Contains(m["message"].(string), "kept") {
		t.Fatalf("the session's file after the restart: %v", m)
	}
	if s, _ := m["seq"].(float64); s <= lastSeq {
		t.Errorf("frames numbered %v after the restart, at or below %v the client saw before", s, lastSeq)
	}
}

// A kit killed without a chance to stop (no Close) leaves the session's
// record and directories; the next kit restores it the same way.
func TestPersistentSessionSurvivesAKill(t *testing.T) {
	b := persistBox(t)
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("1", "echo survived > note.txt")
	seq := last(c.finish("1"))["seq"].(float64)
	// What a kill -9 leaves: the ledger and directories as they are,
	// no Close. (The test's kit is closed at cleanup; its sessions are
	// the new kit's by then, so it only releases its own copy.)
	b2 := reboot(t, b)
	c2 := b2.dial("/?resume="+sid+"&last_seq="+ftoa(seq), nil)
	if c2.hello["resumed"] != true || c2.hello["session_id"] != sid {
		t.Fatalf("resume after the kill: %v", c2.hello)
	}
	c2.prompt("2", "cat note.txt")
	if m := last(c2.finish("2")); !strings.Contains(m["message"].(string), "survived") {
		t.Fatalf("after the kill: %v", m)
	}
}

// Without the resume capability, or on a box that does not persist, a
// session ends with the kit as before: nothing is kept.
func TestSessionsNotPersistentEndWithTheKit(t *testing.T) {
	b := persistBox(t)
	c := b.dial("/", nil) // no resume capability
	c.prompt("1", "echo x > f")
	c.finish("1")
	sid := c.hello["session_id"].(string)
	b2 := restart(t, b)
	if b2.srv.live.lookup(sid) != nil {
		t.Fatal("a session without the resume capability was kept")
	}
	if _, err := os.Stat(filepath.Join(b.root, "state", "sessions", sid)); err == nil {
		t.Error("its ledger entry was kept")
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// A kit killed after its session sat quiet longer than resume_grace (a
// client connected, nothing said) still leaves the session to the next
// kit: resume_grace counts from the kit's death, which its heartbeat
// marks, not from the session's last frame.
func TestPersistentSessionQuietThenKilled(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Sessions = &protocol.SessionsSpec{Persist: true, ResumeGrace: "2s"}
	})
	c := b.dial("/", nil)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := c.hello["session_id"].(string)
	c.prompt("1", "echo kept > note.txt")
	seq := last(c.finish("1"))["seq"].(float64)
	time.Sleep(2500 * time.Millisecond) // quiet for longer than resume_grace, the kit alive
	b2 := reboot(t, b)                  // as a kill leaves it: no Close
	c2 := b2.dial("/?resume="+sid+"&last_seq="+ftoa(seq), nil)
	if c2.hello["resumed"] != true || c2.hello["session_id"] != sid {
		t.Fatalf("resume after a quiet kill: %v", c2.hello)
	}
}
