package kit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/protocol"
)

// An ended session stays listable with its prompts' outcomes; a prompt
// that was running when the session ended is not left "running".
func TestInspectorHistoryKeepsEndedSessions(t *testing.T) {
	started := make(chan string, 8)
	b := newBox(t, scripted(started), withInspector)
	c := b.dial("/", nil)
	sid, _ := c.hello["session_id"].(string)
	c.prompt("p1", "write out.txt 5")
	c.finish("p1")
	c.prompt("p2", "fail")
	c.finish("p2")
	c.prompt("p3", "block")
	for id := range started {
		if id == "p3" {
			break
		}
	}
	c.close()

	var rec inspect.SessionRecord
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := b.get("/inspect/api/history", bearer(b.token(protocol.ScopeInspect)))
		var list struct {
			Sessions []inspect.SessionRecord `json:"sessions"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("history = %s: %v", body, err)
		}
		if len(list.Sessions) == 1 {
			rec = list.Sessions[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history = %s, want the ended session", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rec.ID != sid || rec.Owner != "key" || rec.Ended.Before(rec.Started) || len(rec.Prompts) != 3 {
		t.Fatalf("record = %+v, want %s, owner key, 3 prompts", rec, sid)
	}
	if p := rec.Prompts[0]; p.State != "complete" || p.Outputs["out.txt"].Kind == "" {
		t.Errorf("p1 = %+v, want complete with out.txt", p)
	}
	if p := rec.Prompts[1]; p.State != "error" || p.Code != protocol.CodeAgent && p.Code != protocol.CodeError {
		t.Errorf("p2 = %+v, want an error with its code", p)
	}
	if p := rec.Prompts[2]; p.State == "running" || p.State == "queued" || p.Ended.IsZero() {
		t.Errorf("p3 = %+v, want an outcome: the session ended", p)
	}
	// Live sessions no longer list it.
	_, body := b.get("/inspect/api/sessions", bearer(b.token(protocol.ScopeInspect)))
	if strings.Contains(string(body), sid) {
		t.Errorf("sessions = %s, still lists the ended session", body)
	}
}

// A prompt the session's end leaves without an outcome frame is not left
// "running" or "queued" in what the inspector keeps.
func TestObserversCloseEndsPromptsWithoutAnOutcome(t *testing.T) {
	var o observers
	o.queued("done", "a", nil)
	o.running("done")
	o.publish([]byte(`{"type":"complete","id":"done","message":"ok","seq":1}`))
	o.queued("run", "b", nil)
	o.running("run")
	o.queued("wait", "c", nil)
	o.close()
	got := o.promptList()
	want := map[string]string{"done": "complete", "run": "ended", "wait": "ended"}
	for _, p := range got {
		if p.State != want[p.ID] || p.Ended.IsZero() {
			t.Errorf("prompt %s = %s (ended %v), want %s with an end", p.ID, p.State, p.Ended, want[p.ID])
		}
	}
}

// The exit event and the complete frame fill in what the page shows.
func TestObserversNoteExitLimitAndOutputs(t *testing.T) {
	var o observers
	o.queued("p", "hog", nil)
	o.running("p")
	o.publish([]byte(`{"type":"event","id":"p","event_type":"exit","data":{"code":137,"signal":"SIGKILL","limit":"memory"},"seq":1}`))
	o.publish([]byte(`{"type":"complete","id":"p","message":"","outputs":{"a.txt":{"kind":"server","id":"f1","size":3}},"seq":2}`))
	o.queued("q", "slow", nil)
	o.running("q")
	o.publish([]byte(`{"type":"error","id":"q","error":{"code":"TimeoutError","message":"limits.timeout"},"seq":3}`))
	got := o.promptList()
	if p := got[0]; p.Exit == nil || *p.Exit != 137 || p.Signal != "SIGKILL" || p.Limit != "memory" || p.Outputs["a.txt"].ID != "f1" || p.State != "complete" {
		t.Errorf("p = %+v, want complete, exit 137 SIGKILL, limit memory, a.txt", p)
	}
	if q := got[1]; q.State != "error" || q.Code != "TimeoutError" || q.Limit != "timeout" {
		t.Errorf("q = %+v, want an error with the timeout limit", q)
	}
}

// A box with a writable state dir rereads its history when it starts
// again.
func TestInspectorHistorySurvivesARestart(t *testing.T) {
	root := t.TempDir()
	sameRoot := func(_ *protocol.Manifest, o *Options) { o.Root = root }
	b := newBox(t, scripted(nil), withInspector, sameRoot)
	c := b.dial("/", nil)
	sid, _ := c.hello["session_id"].(string)
	c.prompt("p1", "echo hi")
	c.finish("p1")
	c.close()
	waitHistory(t, b, sid)
	ctx := testkit.Context(t, "the first box to close")
	if err := b.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}

	b2 := newBox(t, scripted(nil), withInspector, sameRoot)
	rec := waitHistory(t, b2, sid)
	if len(rec.Prompts) != 1 || rec.Prompts[0].State != "complete" || rec.Prompts[0].Text != "echo hi" {
		t.Errorf("reread record = %+v, want p1 complete", rec)
	}
}

// waitHistory waits for session id in the box's history.
func waitHistory(t *testing.T, b *box, id string) inspect.SessionRecord {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := b.get("/inspect/api/history", bearer(b.token(protocol.ScopeInspect)))
		var list struct {
			Sessions []inspect.SessionRecord `json:"sessions"`
		}
		json.Unmarshal(body, &list)
		for _, r := range list.Sessions {
			if r.ID == id {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("history = %s, want session %s", body, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
