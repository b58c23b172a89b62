package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// box is a kit served over loopback for a test.
type box struct {
	t    testing.TB
	srv  *Server
	ts   *httptest.Server
	key  string
	root string
	url  string // http://127.0.0.1:port
	man  *protocol.Manifest
}

type boxOpt func(*protocol.Manifest, *Options)

func testLogger(t testing.TB) *slog.Logger {
	return testkit.Logger(t, slog.LevelDebug)
}

func testManifest(key string) *protocol.Manifest {
	m, err := protocol.ParseManifest([]byte(`{"name":"t","version":"0.1.0"}`))
	if err != nil {
		panic(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(key)
	// The cold path, unless a test turns warm sessions on (withWarm).
	m.Agent = &protocol.AgentSpec{Type: protocol.AgentExec, Warm: new(0)}
	return m
}

// withWarm keeps n warm sessions.
func withWarm(n int) boxOpt {
	return func(m *protocol.Manifest, _ *Options) {
		if m.Agent == nil {
			m.Agent = &protocol.AgentSpec{Type: protocol.AgentExec}
		}
		m.Agent.Warm = &n
	}
}

// newBox serves ag from a fresh root under t.TempDir. It checks at cleanup
// that Close leaves no kit goroutine behind.
func newBox(t testing.TB, ag agent.Agent, opts ...boxOpt) *box {
	t.Helper()
	t.Cleanup(func() { checkLeaks(t) })
	key := protocol.NewKey()
	root := t.TempDir()
	m := testManifest(key)
	o := Options{Manifest: m, Key: key, Root: root, Agent: ag, Logger: testLogger(t), Getenv: func(string) string { return "" }}
	ts := httptest.NewUnstartedServer(nil)
	o.PublicURL = "http://" + ts.Listener.Addr().String()
	for _, f := range opts {
		f(m, &o)
	}
	srv, err := New(o)
	if err != nil {
		ts.Close()
		t.Fatalf("New: %v", err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	b := &box{t: t, srv: srv, ts: ts, key: key, root: root, url: ts.URL, man: m}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		ts.Close()
	})
	return b
}

// checkLeaks fails the test when goroutines of the kit packages outlive
// Close.
func checkLeaks(t testing.TB) {
	t.Helper()
	testkit.NoGoroutines(t, "glovebox/kit.", "glovebox/kit/", "internal/wsconn")
}

func (b *box) get(path string, header http.Header) (*http.Response, []byte) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func (b *box) auth() http.Header { return bearer(b.key) }

// token mints a token of the box's key with the given scopes, valid for an
// hour.
func (b *box) token(scopes ...string) string {
	b.t.Helper()
	return b.tokenFor("", scopes...)
}

// tokenFor is token for subject sub (its sessions are sub's).
func (b *box) tokenFor(sub string, scopes ...string) string {
	b.t.Helper()
	tok, err := protocol.MintToken(b.key, protocol.TokenClaims{Scopes: scopes, Subject: sub, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		b.t.Fatal(err)
	}
	return tok
}

// bearer is the Authorization header for a key or token.
func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// v1client speaks protocol v1 as the spec describes it: JSON frames decoded
// by field name, without package protocol.
type v1client struct {
	t      testing.TB
	c      *wsconn.Conn
	frames chan map[string]any
	done   chan struct{}
	closed sync.Once
	hello  map[string]any
}

func (b *box) dial(path string, header http.Header) *v1client {
	b.t.Helper()
	if header == nil {
		header = b.auth()
	}
	c, resp, err := wsconn.Dial(testkit.Context(b.t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+path, wsconn.DialOptions{Header: header})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		b.t.Fatalf("dial %s: %v (status %d)", path, err, status)
	}
	cl := &v1client{t: b.t, c: c, frames: make(chan map[string]any, 1<<16), done: make(chan struct{})}
	go cl.readLoop()
	b.t.Cleanup(cl.close)
	cl.hello = cl.next()
	if cl.hello["type"] != "hello" {
		b.t.Fatalf("first frame = %v, want a hello", cl.hello)
	}
	return cl
}

func (c *v1client) readLoop() {
	defer close(c.done)
	defer close(c.frames)
	for {
		data, err := c.c.ReadMessage()
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			c.t.Errorf("server sent a frame that is not a JSON object: %q", data)
			return
		}
		c.frames <- m
	}
}

// close ends the connection with a close frame, as a v1 client does.
func (c *v1client) close() {
	c.closed.Do(func() {
		c.c.WriteClose(wsconn.CloseNormal, "client closed", time.Now().Add(time.Second))
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
		c.c.Close()
		<-c.done
	})
}

// drop cuts the connection without a close frame.
func (c *v1client) drop() {
	c.closed.Do(func() {
		c.c.Close()
		<-c.done
	})
}

func (c *v1client) send(v map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	c.sendRaw(string(b))
}

func (c *v1client) sendRaw(s string) {
	c.t.Helper()
	if err := c.c.WriteText([]byte(s)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *v1client) prompt(id, text string) {
	c.t.Helper()
	c.send(map[string]any{"type": "prompt", "id": id, "text": text, "inputs": map[string]any{}})
}

// next returns the next frame, failing the test if none comes within
// testkit.Timeout.
func (c *v1client) next() map[string]any {
	c.t.Helper()
	m, ok := testkit.Next(c.t, c.frames, "the server's next frame")
	if !ok {
		c.t.Fatalf("connection closed while waiting for the server's next frame")
	}
	return m
}

// until reads frames until one satisfies stop and returns them all.
func (c *v1client) until(stop func(map[string]any) bool) []map[string]any {
	c.t.Helper()
	var got []map[string]any
	for {
		m := c.next()
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

// finish reads until prompt id completes or fails and returns its frames.
func (c *v1client) finish(id string) []map[string]any {
	c.t.Helper()
	return c.until(func(m map[string]any) bool {
		return (m["type"] == "complete" || m["type"] == "error") && m["id"] == id
	})
}

func last(fs []map[string]any) map[string]any { return fs[len(fs)-1] }

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func ofType(fs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, f := range fs {
		if f["type"] == typ {
			out = append(out, f)
		}
	}
	return out
}

// scripted is the tests' Go agent: each prompt's text is a command.
//
//	echo WORDS          emit text_delta WORDS, answer WORDS
//	events N            emit N events numbered 0..N-1
//	block               wait until cancelled
//	ask                 push a slot, answer with the client's value
//	show                push a slot that needs no answer, then return
//	write NAME BYTES    write NAME (a slash path) in the output dir
//	tag PATH            TagOutput(PATH)
//	env NAME            answer with the agent environment's NAME
//	skills              answer with the skill results, one per line
//	text                answer with the text as received (quoted)
//	fail                return an error
func scripted(started chan<- string) agent.Agent {
	return agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
		if started != nil {
			started <- t.ID()
		}
		cmd, arg, _ := strings.Cut(t.Text(), " ")
		switch cmd {
		case "echo":
			if err := t.Emit("text_delta", map[string]string{"text": arg}); err != nil {
				return "", err
			}
			return arg, nil
		case "events":
			n, _ := strconv.Atoi(arg)
			for i := 0; i < n; i++ {
				if err := t.Emit("text_delta", json.RawMessage(`{"text":"`+strconv.Itoa(i)+`"}`)); err != nil {
					return "", err
				}
			}
			return "done", nil
		case "block":
			<-ctx.Done()
			return "", ctx.Err()
		case "ask":
			v, err := t.Ask(ctx, "confirm", map[string]string{"q": "ok?"})
			if err != nil {
				return "", err
			}
			return string(v), nil
		case "show":
			id, err := t.Show("progress", map[string]int{"pct": 50})
			return id, err
		case "write":
			name, size, _ := strings.Cut(arg, " ")
			n, _ := strconv.Atoi(size)
			p := filepath.Join(t.Session().Dirs.Output, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			return "", os.WriteFile(p, bytes.Repeat([]byte("x"), n), 0o644)
		case "tag":
			return "", t.TagOutput(arg)
		case "env":
			for _, kv := range t.Session().Env {
				if k, v, _ := strings.Cut(kv, "="); k == arg {
					return v, nil
				}
			}
			return "<unset>", nil
		case "skills":
			var b strings.Builder
			for _, s := range t.Skills() {
				fmt.Fprintf(&b, "%s=%s\n", s.Name, s.Content)
			}
			return b.String(), nil
		case "fail":
			return "", fmt.Errorf("scripted failure")
		}
		return strconv.Quote(t.Text()), nil
	})
}
