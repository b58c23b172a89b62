package kit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/logs"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestOperatorRoutesAuth: each operator route answers its scopes and the
// key, and 401 to everything else.
func TestOperatorRoutesAuth(t *testing.T) {
	b := newBox(t, scripted(nil))
	filesOnly, _ := protocol.MintToken(b.key, protocol.TokenClaims{Scopes: []string{protocol.ScopeFiles}, Files: []string{"x"}, Expires: time.Now().Add(time.Hour)})
	expired, _ := protocol.MintToken(b.key, protocol.TokenClaims{Scopes: []string{protocol.ScopeAdmin}, Expires: time.Now().Add(-time.Hour)})
	for _, tc := range []struct {
		path string
		ok   []string // scopes that open it
	}{
		{"/sessions", []string{protocol.ScopeAdmin}},
		{"/metrics", []string{protocol.ScopeMetrics}},
		{"/logs", []string{protocol.ScopeLogs, protocol.ScopeAdmin}},
		{"/files", []string{protocol.ScopeAdmin, protocol.ScopeFiles}},
	} {
		if resp, _ := b.get(tc.path, b.auth()); resp.StatusCode != 200 {
			t.Errorf("GET %s with the key = %d, want 200", tc.path, resp.StatusCode)
		}
		for _, scope := range protocol.Scopes {
			want := 401
			for _, s := range tc.ok {
				if s == scope {
					want = 200
				}
			}
			if resp, _ := b.get(tc.path, bearer(b.token(scope))); resp.StatusCode != want {
				t.Errorf("GET %s with a %s token = %d, want %d", tc.path, scope, resp.StatusCode, want)
			}
		}
		for name, h := range map[string]http.Header{"no bearer": nil, "wrong key": bearer("nope"), "expired token": bearer(expired)} {
			if resp, _ := b.get(tc.path, h); resp.StatusCode != 401 {
				t.Errorf("GET %s with %s = %d, want 401", tc.path, name, resp.StatusCode)
			}
		}
	}
	if resp, _ := b.get("/files", bearer(filesOnly)); resp.StatusCode != 401 {
		t.Errorf("GET /files with a files token limited to some ids = %d, want 401", resp.StatusCode)
	}
	if resp, _ := b.get("/metrics?token="+b.token(protocol.ScopeMetrics), nil); resp.StatusCode != 401 {
		t.Errorf("GET /metrics with ?token= = %d, want 401: only /files takes a token in the URL", resp.StatusCode)
	}
}

// TestSessionsRoute shows a running prompt, the queue behind it, and a
// detached session waiting for its resume.
func TestSessionsRoute(t *testing.T) {
	started := make(chan string, 4)
	b := newBox(t, scripted(started))
	c := b.dial("/", nil)
	c.prompt("slow", "block")
	c.prompt("next", "echo hi")
	testkit.Recv(t, started, "the blocking prompt to start")
	testkit.Until(t, "the second prompt to be queued", func() bool {
		_, body := b.get("/sessions", b.auth())
		return strings.Contains(string(body), `"queued":1`)
	})
	_, body := b.get("/sessions", b.auth())
	var l protocol.SessionList
	if err := json.Unmarshal(body, &l); err != nil || len(l.Sessions) != 1 {
		t.Fatalf("GET /sessions = %s, %v", body, err)
	}
	s := l.Sessions[0]
	if s.ID != c.hello["session_id"] || s.Owner != "key" || s.State != protocol.SessionRunning || s.Running == nil ||
		s.Running.ID != "slow" || s.Queued != 1 || s.Created.IsZero() || s.LastActivity.Before(s.Created) {
		t.Errorf("session = %+v", s)
	}
	c.send(map[string]any{"type": "abort", "id": "slow"})
	c.finish("next")
	_, body = b.get("/sessions", b.auth())
	l = protocol.SessionList{}
	json.Unmarshal(body, &l)
	if s := l.Sessions[0]; s.State != protocol.SessionIdle || s.Running != nil || s.Prompts != 2 || s.Queued != 0 {
		t.Errorf("after both prompts: %+v", s)
	}

	// A resumable session whose socket dropped is detached.
	c2 := b.dial("/", nil)
	c2.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	c2.prompt("p", "echo x")
	c2.finish("p")
	c2.drop()
	testkit.Until(t, "the dropped session to be detached", func() bool {
		_, body := b.get("/sessions", b.auth())
		return strings.Contains(string(body), `"state":"detached"`)
	})
}

// TestFileListAndDelete lists a parked output and deletes it.
func TestFileListAndDelete(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	c.prompt("w", "write big.bin 1100000")
	m := last(c.finish("w"))
	ref, _ := m["outputs"].(map[string]any)["big.bin"].(map[string]any)
	if ref["kind"] != "server" {
		t.Fatalf("output = %v, want a server ref", m)
	}
	id := ref["id"].(string)
	_, body := b.get("/files", b.auth())
	var l protocol.FileList
	if err := json.Unmarshal(body, &l); err != nil || len(l.Files) != 1 {
		t.Fatalf("GET /files = %s, %v", body, err)
	}
	f := l.Files[0]
	if f.ID != id || f.Name != "big.bin" || f.Size != 1100000 || f.Session != c.hello["session_id"] || f.Prompt != "w" || !f.Expires.After(f.Created) {
		t.Errorf("file = %+v", f)
	}
	del := func(id string) int {
		req, _ := http.NewRequest(http.MethodDelete, b.url+"/files/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+b.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del(id); code != 204 {
		t.Errorf("DELETE /files/%s = %d, want 204", id, code)
	}
	if code := del(id); code != 404 {
		t.Errorf("DELETE again = %d, want 404", code)
	}
	if resp, _ := b.get("/files/"+id, b.auth()); resp.StatusCode != 404 {
		t.Errorf("GET after DELETE = %d, want 404", resp.StatusCode)
	}
	if code := del("..%2Fetc"); code != 404 {
		t.Errorf("DELETE of a bad id = %d, want 404", code)
	}
}

// TestLogsFollow follows /logs while a session opens and a prompt runs.
func TestLogsFollow(t *testing.T) {
	b := newBox(t, scripted(nil))
	ctx, cancel := context.WithCancel(testkit.Context(t, "the /logs stream"))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/logs?follow=1&since=1h", nil)
	req.Header = bearer(b.token(protocol.ScopeLogs))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("GET /logs?follow=1 = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"bad": sc.Text()}
			}
			lines <- m
		}
	}()
	c := b.dial("/", nil)
	c.prompt("p", "echo secret-words")
	c.finish("p")
	for {
		m, ok := <-lines
		if !ok {
			t.Fatal("the /logs stream ended before the prompt's line")
		}
		if m["bad"] != nil {
			t.Fatalf("a /logs line is not JSON: %v", m["bad"])
		}
		if m["msg"] == "prompt" {
			if m["prompt"] != "p" || m["outcome"] != "complete" || m["session"] != c.hello["session_id"] {
				t.Errorf("prompt line = %v", m)
			}
			if strings.Contains(fmt.Sprint(m), "secret-words") {
				t.Errorf("the prompt line holds the prompt's text: %v", m)
			}
			break
		}
	}
	cancel()
	for range lines {
	}
	if resp, _ := b.get("/logs?since=yesterday", b.auth()); resp.StatusCode != 400 {
		t.Errorf("GET /logs?since=yesterday = %d, want 400", resp.StatusCode)
	}
}

// TestLogsFollowersBounded: at most logs.MaxFollowers follow /logs at once;
// one more is refused with 503 and Retry-After, and a place freed by a
// follower that leaves is taken again. Reading without follow stays open.
func TestLogsFollowersBounded(t *testing.T) {
	b := newBox(t, scripted(nil))
	follow := func(ctx context.Context) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/logs?follow=1", nil)
		req.Header = bearer(b.token(protocol.ScopeLogs))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ctx := testkit.Context(t, "the /logs followers")
	cancels := make([]context.CancelFunc, 0, logs.MaxFollowers)
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	var first *http.Response
	for i := range logs.MaxFollowers {
		fctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		resp := follow(fctx)
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("follower %d: %d, want 200", i+1, resp.StatusCode)
		}
		if i == 0 {
			first = resp
		}
	}
	over := follow(ctx)
	body, _ := io.ReadAll(over.Body)
	over.Body.Close()
	if over.StatusCode != http.StatusServiceUnavailable || over.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "too many /logs followers") {
		t.Fatalf("follower %d: %d %q (Retry-After %q), want 503 naming the bound", logs.MaxFollowers+1, over.StatusCode, body, over.Header.Get("Retry-After"))
	}
	if resp, _ := b.get("/logs", bearer(b.token(protocol.ScopeLogs))); resp.StatusCode != 200 {
		t.Errorf("GET /logs without follow while the followers are full = %d, want 200", resp.StatusCode)
	}
	// The first follower leaves: its place is free once the kit has seen it go.
	cancels[0]()
	first.Body.Close()
	testkit.Until(t, "a new follower admitted once one left", func() bool {
		fctx, cancel := context.WithCancel(ctx)
		resp := follow(fctx)
		if resp.StatusCode == 200 {
			cancels = append(cancels, cancel)
			defer resp.Body.Close()
			return true
		}
		cancel()
		resp.Body.Close()
		return false
	})
}

// TestURLInputSwitch: a url input on loopback is refused, naming the
// switch that allows it, until the manifest sets it.
func TestURLInputSwitch(t *testing.T) {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "local") }))
	defer src.Close()
	input := map[string]any{"f.txt": map[string]any{"kind": "url", "name": "f.txt", "url": src.URL + "/f.txt"}}

	t.Run("refused", func(t *testing.T) {
		b := newBox(t, scripted(nil))
		c := b.dial("/", nil)
		promptWith(c, "p", "text", input)
		m := last(c.finish("p"))
		if errCode(m) != protocol.CodeInput || !strings.Contains(fmt.Sprint(m), "[inputs] allow_loopback_urls = true in glovebox.toml") {
			t.Errorf("loopback url input without the switch = %v, want an InputError naming the switch", m)
		}
	})
	t.Run("allowed", func(t *testing.T) {
		b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
			m.Inputs = &protocol.InputsSpec{AllowLoopbackURLs: true}
		})
		c := b.dial("/", nil)
		promptWith(c, "p", "text", input)
		if m := last(c.finish("p")); m["type"] != "complete" {
			t.Errorf("loopback url input with allow_loopback_urls = %v, want complete", m)
		}
	})
}

// TestMetricsCounts drives outcomes the metrics count: a complete, an
// agent error, a sandbox limit, a prompt queued behind a running one.
func TestMetricsCounts(t *testing.T) {
	started := make(chan string, 8)
	inner := scripted(started)
	b := newBox(t, agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		if turn.Text() == "limit" {
			return "", &agent.Error{Code: protocol.CodeLimit, Err: errors.New("the session's memory limit was hit")}
		}
		return inner.(agent.Func)(ctx, turn)
	}))
	metrics := func() string {
		resp, body := b.get("/metrics", bearer(b.token(protocol.ScopeMetrics)))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
			t.Fatalf("GET /metrics = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(body)
	}
	c := b.dial("/", nil)
	for id, text := range map[string]string{"ok": "echo x", "bad": "fail", "lim": "limit"} {
		c.prompt(id, text)
		c.finish(id)
		if id != "lim" {
			testkit.Recv(t, started, "prompt "+id+"'s start signal")
		}
	}
	c.prompt("slow", "block")
	testkit.Recv(t, started, "the blocking prompt to start")
	c.prompt("queued", "echo y")
	testkit.Until(t, "the queued prompt in the queue depth", func() bool { return strings.Contains(metrics(), "\nglovebox_queue_depth 1\n") })
	m := metrics()
	for _, want := range []string{
		"\nglovebox_prompts_running 1\n",
		"\nglovebox_sessions_open 1\n",
		"\nglovebox_sessions_total 1\n",
		"\nglovebox_prompts_total{outcome=\"complete\"} 1\n",
		"\nglovebox_prompts_total{outcome=\"AgentError\"} 1\n",
		"\nglovebox_prompts_total{outcome=\"LimitError\"} 1\n",
		"\nglovebox_sandbox_limit_errors_total 1\n",
		"\nglovebox_prompt_duration_seconds_bucket{le=\"+Inf\"} 3\n",
		"\nglovebox_prompt_duration_seconds_count 3\n",
		"\nglovebox_build_info{kit_version=\"",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", strings.TrimSpace(want), m)
		}
	}
	c.send(map[string]any{"type": "abort", "id": "slow"})
	c.finish("queued")
}
