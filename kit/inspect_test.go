package kit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/protocol"
)

func withInspector(_ *protocol.Manifest, o *Options) { o.Inspect = true }

func (b *box) post(path string, header http.Header, body string) (*http.Response, []byte) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var buf strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&buf)
	return resp, []byte(buf.String())
}

func TestInspectorIsOffUnlessEnabled(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		b := newBox(t, scripted(nil))
		for _, p := range []string{"/inspect", "/inspect/", "/inspect/app.js", "/inspect/api/sessions"} {
			if resp, _ := b.get(p, b.auth()); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s on a box without the inspector = %d, want 404", p, resp.StatusCode)
			}
		}
	})
	t.Run("manifest", func(t *testing.T) {
		m := func(m *protocol.Manifest, _ *Options) { m.Inspect = &protocol.InspectSpec{Enabled: true} }
		b := newBox(t, scripted(nil), m)
		if resp, _ := b.get("/inspect/api/sessions", b.auth()); resp.StatusCode != http.StatusOK {
			t.Errorf("GET /inspect/api/sessions with inspect.enabled in the manifest = %d, want 200", resp.StatusCode)
		}
	})
}

func TestInspectorPageAndAuth(t *testing.T) {
	b := newBox(t, scripted(nil), withInspector)
	resp, body := b.get("/inspect/", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `<script src="app.js"`) {
		t.Fatalf("GET /inspect/ = %d %q, want the page", resp.StatusCode, body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q allows inline code", csp)
	}
	for _, p := range []string{"/inspect/app.js", "/inspect/app.css"} {
		if resp, _ := b.get(p, nil); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s = %d (nosniff %q), want 200 with nosniff", p, resp.StatusCode, resp.Header.Get("X-Content-Type-Options"))
		}
	}
	if resp, _ := b.get("/inspect/../glovebox.json", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of a path outside the page = %d, want 404", resp.StatusCode)
	}

	for _, c := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"none", nil, http.StatusUnauthorized},
		{"wrong key", bearer(protocol.NewKey()), http.StatusUnauthorized},
		{"connect token", bearer(b.token(protocol.ScopeConnect, protocol.ScopeFiles)), http.StatusUnauthorized},
		{"inspect token", bearer(b.token(protocol.ScopeInspect)), http.StatusOK},
		{"key", b.auth(), http.StatusOK},
	} {
		if resp, _ := b.get("/inspect/api/sessions", c.header); resp.StatusCode != c.want {
			t.Errorf("GET /inspect/api/sessions with %s = %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}

	// Login: only with the CSRF header, only with a good bearer.
	h := bearer(b.token(protocol.ScopeInspect))
	if resp, _ := b.post("/inspect/api/login", h, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("login without %s = %d, want 403", inspect.Header, resp.StatusCode)
	}
	bad := bearer(b.token(protocol.ScopeConnect))
	bad.Set(inspect.Header, "1")
	if resp, _ := b.post("/inspect/api/login", bad, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a connect token = %d, want 401", resp.StatusCode)
	}
	h.Set(inspect.Header, "1")
	resp, _ = b.post("/inspect/api/login", h, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login = %d, want 200", resp.StatusCode)
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cookies))
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/inspect" || ck.MaxAge <= 0 || ck.MaxAge > int(time.Hour/time.Second) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/inspect, a Max-Age within the token's hour", ck)
	}
	withCookie := http.Header{"Cookie": {ck.Name + "=" + ck.Value}}
	if resp, _ := b.get("/inspect/api/sessions", withCookie); resp.StatusCode != http.StatusOK {
		t.Errorf("GET sessions with the cookie = %d, want 200", resp.StatusCode)
	}
	if resp, _ := b.get("/inspect/api/sessions", http.Header{"Cookie": {ck.Name + "=forged"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET sessions with a forged cookie = %d, want 401", resp.StatusCode)
	}
	// The cookie opens the inspector and nothing else.
	if resp, _ := b.get("/environment", withCookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /environment with the inspector's cookie = %d, want 401", resp.StatusCode)
	}
	out := http.Header{"Cookie": {ck.Name + "=" + ck.Value}, inspect.Header: {"1"}}
	if resp, _ := b.post("/inspect/api/logout", out, ""); resp.StatusCode != http.StatusNoContent {
		t.Errorf("logout = %d, want 204", resp.StatusCode)
	}
	if resp, _ := b.get("/inspect/api/sessions", withCookie); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET sessions with a cookie after logout = %d, want 401", resp.StatusCode)
	}
}

// sse reads server-sent events from a response body.
type sse struct {
	events chan [2]string // event, data
}

func readSSE(t *testing.T, resp *http.Response) *sse {
	s := &sse{events: make(chan [2]string, 1024)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				ev = e
			} else if d, ok := strings.CutPrefix(line, "data: "); ok {
				s.events <- [2]string{ev, d}
			}
		}
	}()
	return s
}

func (s *sse) until(t *testing.T, what string, stop func(event string, frame map[string]any) bool) {
	t.Helper()
	for {
		e, ok := testkit.Next(t, s.events, what)
		if !ok {
			t.Fatalf("event stream ended while waiting for %s", what)
		}
		var f map[string]any
		json.Unmarshal([]byte(e[1]), &f)
		if stop(e[0], f) {
			return
		}
	}
}

func TestInspectorFollowsASessionAndAnswersItsSlot(t *testing.T) {
	b := newBox(t, scripted(nil), withInspector)
	c := b.dial("/", nil)
	defer c.close()
	sid, _ := c.hello["session_id"].(string)
	c.prompt("p1", "echo hello")
	c.finish("p1")

	ctx := testkit.Context(t, "the inspector's event stream")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/inspect/api/sessions/"+sid+"/events", nil)
	req.Header = bearer(b.token(protocol.ScopeInspect))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := readSSE(t, resp)
	// What the session sent before the inspector looked comes first.
	s.until(t, "p1's event from the history", func(e string, f map[string]any) bool {
		return e == "frame" && f["type"] == "event" && f["id"] == "p1"
	})
	s.until(t, "p1's complete from the history", func(e string, f map[string]any) bool {
		return f["type"] == "complete" && f["id"] == "p1"
	})

	c.prompt("p2", "ask")
	var slotID string
	s.until(t, "p2's display_push", func(e string, f map[string]any) bool {
		if f["type"] != "display_push" {
			return false
		}
		slotID, _ = f["slot"].(map[string]any)["id"].(string)
		return true
	})
	h := bearer(b.token(protocol.ScopeInspect))
	h.Set(inspect.Header, "1")
	if resp, body := b.post("/inspect/api/sessions/"+sid+"/slots/nope", h, `{"value":1}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("answer to an unknown slot = %d %s, want 404", resp.StatusCode, body)
	}
	if resp, body := b.post("/inspect/api/sessions/"+sid+"/slots/"+slotID, h, `{"value":"from the page"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("answer = %d %s, want 204", resp.StatusCode, body)
	}
	// The session's own client sees the slot leave and the prompt end
	// with the page's answer.
	fs := c.finish("p2")
	if got := last(fs)["message"]; got != `"from the page"` {
		t.Errorf("p2's message = %v, want the page's answer", got)
	}
	if len(ofType(fs, "display_clear")) != 1 {
		t.Errorf("the client got %d display_clear frames, want 1", len(ofType(fs, "display_clear")))
	}
	s.until(t, "p2's complete", func(e string, f map[string]any) bool { return f["type"] == "complete" && f["id"] == "p2" })

	_, body := b.get("/inspect/api/sessions", bearer(b.token(protocol.ScopeInspect)))
	var list struct {
		Sessions []inspect.SessionRow `json:"sessions"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("sessions = %s (%v), want one", body, err)
	}
	got := list.Sessions[0]
	if got.ID != sid || got.Owner != "key" || !got.Connected || len(got.Prompts) != 2 {
		t.Fatalf("session = %+v, want %s, owner key, connected, 2 prompts", got, sid)
	}
	for i, want := range []struct{ id, text, state string }{{"p1", "echo hello", "complete"}, {"p2", "ask", "complete"}} {
		p := got.Prompts[i]
		if p.ID != want.id || p.Text != want.text || p.State != want.state || p.Ended.IsZero() {
			t.Errorf("prompt %d = %+v, want %s %q %s", i, p, want.id, want.text, want.state)
		}
	}

	// The session's end ends the stream.
	c.close()
	s.until(t, "the end of the stream", func(e string, f map[string]any) bool { return e == "end" })
}

func TestInspectorDropsASlowObserverWithoutSlowingTheSession(t *testing.T) {
	b := newBox(t, scripted(nil), withInspector)
	c := b.dial("/", nil)
	defer c.close()
	sid, _ := c.hello["session_id"].(string)
	ss := b.srv.lookup(sid)
	_, stuck, ok := ss.obs.subscribe() // never read
	if !ok {
		t.Fatal("subscribe refused")
	}
	n := 4 * observeQueue
	c.prompt("p1", "events "+strconv.Itoa(n))
	fs := c.finish("p1")
	if got := len(ofType(fs, "event")); got != n {
		t.Fatalf("the client got %d events, want %d", got, n)
	}
	// The observer was dropped: its channel holds what it had room for,
	// then is closed.
	got := 0
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		select {
		case _, open := <-stuck:
			if !open {
				if got != observeQueue {
					t.Errorf("the slow observer got %d frames before it was dropped, want %d", got, observeQueue)
				}
				return
			}
			got++
		case <-ctx.Done():
			t.Fatalf("the slow observer's channel was not closed (it got %d frames)", got)
		}
	}
}

func TestObserversBoundTheirHistory(t *testing.T) {
	var o observers
	big := []byte(`{"type":"event","data":"` + strings.Repeat("x", 4096) + `"}`)
	for range 2 * observeHistoryFrames {
		o.publish(big)
	}
	past, _, ok := o.subscribe()
	if !ok {
		t.Fatal("subscribe refused")
	}
	total := 0
	for _, f := range past {
		total += len(f)
	}
	if len(past) > observeHistoryFrames || total > observeHistoryBytes {
		t.Errorf("history kept %d frames, %d bytes; want at most %d and %d", len(past), total, observeHistoryFrames, observeHistoryBytes)
	}
	for range observeMaxPerSession - 1 {
		if _, _, ok := o.subscribe(); !ok {
			t.Fatal("subscribe refused below the limit")
		}
	}
	if _, _, ok := o.subscribe(); ok {
		t.Errorf("subscribe past %d observers accepted", observeMaxPerSession)
	}
	o.close()
	if _, _, ok := o.subscribe(); ok {
		t.Errorf("subscribe after close accepted")
	}
}

func TestObserversShareABoxBudget(t *testing.T) {
	var total atomic.Int64
	frame := []byte(`{"type":"event","data":"` + strings.Repeat("y", 64<<10) + `"}`)
	sessions := make([]*observers, 2*observeTotalBytes/observeHistoryBytes)
	for i := range sessions {
		sessions[i] = &observers{total: &total}
		for range observeHistoryBytes / len(frame) {
			sessions[i].publish(frame)
		}
	}
	if got := total.Load(); got > observeTotalBytes+int64(len(sessions)*len(frame)) {
		t.Errorf("histories hold %d bytes, want about %d at most", got, observeTotalBytes)
	}
	for _, o := range sessions {
		o.close()
	}
	if got := total.Load(); got != 0 {
		t.Errorf("after every session closed the histories count %d bytes, want 0", got)
	}
}

// TestInspectorAbortsAPrompt aborts a running exec prompt and a queued
// one through the inspector's route, with an inspect token's cookie, and
// the session's client sees the same frames as for its own abort.
func TestInspectorAbortsAPrompt(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), withInspector)
	c := b.dial("/", nil)
	defer c.close()
	sid, _ := c.hello["session_id"].(string)

	login := bearer(b.token(protocol.ScopeInspect))
	login.Set(inspect.Header, "1")
	resp, _ := b.post("/inspect/api/login", login, "")
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("login = %d with %d cookies, want 200 and one", resp.StatusCode, len(resp.Cookies()))
	}
	ck := resp.Cookies()[0]
	cookie := ck.Name + "=" + ck.Value
	h := http.Header{"Cookie": {cookie}, inspect.Header: {"1"}}
	abort := func(session, prompt string) string {
		return "/inspect/api/sessions/" + session + "/prompts/" + prompt + "/abort"
	}

	c.prompt("long", "echo running; sleep 30")
	c.until(func(m map[string]any) bool { return m["id"] == "long" && m["type"] == "event" }) // it runs
	c.prompt("queued", "echo never")
	// The kit has it queued once the inspector lists it: the frame is on
	// its way until then.
	testkit.Until(t, "the queued prompt listed by the inspector", func() bool {
		_, body := b.do(http.MethodGet, "/inspect/api/sessions", h, nil)
		return bytes.Contains(body, []byte(`"id":"queued"`))
	})

	// Refused: without the header, without auth, with a token that is
	// not the inspector's, by GET, for what does not exist.
	for _, r := range []struct {
		name   string
		method string
		path   string
		header http.Header
		want   int
	}{
		{"POST without " + inspect.Header, http.MethodPost, abort(sid, "long"), http.Header{"Cookie": {cookie}}, http.StatusForbidden},
		{"POST without auth", http.MethodPost, abort(sid, "long"), http.Header{inspect.Header: {"1"}}, http.StatusUnauthorized},
		{"POST with a connect token", http.MethodPost, abort(sid, "long"), func() http.Header {
			h := bearer(b.token(protocol.ScopeConnect))
			h.Set(inspect.Header, "1")
			return h
		}(), http.StatusUnauthorized},
		{"GET", http.MethodGet, abort(sid, "long"), h, http.StatusNotFound},
		{"an unknown session", http.MethodPost, abort("nosuchsession", "long"), h, http.StatusNotFound},
		{"an unknown prompt", http.MethodPost, abort(sid, "nope"), h, http.StatusNotFound},
	} {
		if resp, body := b.do(r.method, r.path, r.header, nil); resp.StatusCode != r.want {
			t.Errorf("%s = %d %s, want %d", r.name, resp.StatusCode, body, r.want)
		}
	}

	// The queued prompt is removed: its AbortError comes at once, and
	// the long one still runs.
	if resp, body := b.post(abort(sid, "queued"), h, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("abort of the queued prompt = %d %s, want 204", resp.StatusCode, body)
	}
	if m := c.next(); m["type"] != "error" || m["id"] != "queued" || errCode(m) != protocol.CodeAborted {
		t.Fatalf("after the queued prompt's abort the client got %v, want its %s", m, protocol.CodeAborted)
	}
	// The running one is cancelled: its process is stopped and the
	// client gets its AbortError, long before sleep 30 would end.
	if resp, body := b.post(abort(sid, "long"), h, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("abort of the running prompt = %d %s, want 204", resp.StatusCode, body)
	}
	if m := last(c.finish("long")); m["type"] != "error" || errCode(m) != protocol.CodeAborted {
		t.Fatalf("the running prompt ended with %v, want its %s", m, protocol.CodeAborted)
	}
	for _, p := range []string{"long", "queued"} {
		if resp, body := b.post(abort(sid, p), h, ""); resp.StatusCode != http.StatusConflict {
			t.Errorf("abort of %s once it ended = %d %s, want 409", p, resp.StatusCode, body)
		}
	}

	// The inspector's list shows both aborted; the session goes on.
	_, body := b.get("/inspect/api/sessions", http.Header{"Cookie": {cookie}})
	var list struct {
		Sessions []inspect.SessionRow `json:"sessions"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("sessions = %s (%v), want one", body, err)
	}
	for _, p := range list.Sessions[0].Prompts {
		if p.State != "error" || p.Code != protocol.CodeAborted {
			t.Errorf("prompt %s: state %s code %s, want error %s", p.ID, p.State, p.Code, protocol.CodeAborted)
		}
	}
	c.prompt("after", "echo after")
	if m := last(c.finish("after")); m["type"] != "complete" {
		t.Errorf("a prompt after the aborts ended with %v, want complete", m)
	}
}
