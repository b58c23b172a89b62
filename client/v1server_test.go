package client_test

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// v1Server is a box written from the original's behavioural spec (§4, §5.3,
// §8) that speaks only protocol v1: no hello, no sequence numbers, display
// frames without a prompt id, unknown frame types ignored. Its agent is a
// tiny script keyed by the prompt text:
//
//	echo WORDS   text_delta per word, then complete with WORDS
//	confirm      display_push, waits for display_resolve/reject, then complete
//	wait         runs until aborted (AbortError)
//	fail         error {code: Error, message: boom}
//	malformed    a complete frame that cannot be decoded (outputs: 42)
//	files        complete with an inline and a server output
//	foreign      complete with a server output whose URL names another
//	             origin (its id, "x", is stored here)
//	urlout       complete with a url output on another origin
//	inputs       complete listing the inputs as name=content
//	flood N      N text_delta events of 1KB, then complete
//	drop         one event, then the socket is closed mid-prompt
//	freeze       the connection stops reading (and so answers no pings)
//	             until the test ends, as a hung peer does
type v1Server struct {
	t       *testing.T
	key     string
	srv     *httptest.Server
	foreign string // base URL used by "foreign"

	envRequests atomic.Int32
	mu          sync.Mutex
	files       map[string][]byte
	nextFile    int
	aborts      []string
	frames      []string // every client frame's type, in order
	thaw        chan struct{}
}

func newV1Server(t *testing.T, key string) *v1Server {
	s := &v1Server{t: t, key: key, files: map[string][]byte{}, thaw: make(chan struct{})}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	t.Cleanup(func() { close(s.thaw) })
	return s
}

// url is the WebSocket endpoint URL.
func (s *v1Server) url() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") }

func (s *v1Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") {
		return false
	}
	tok := strings.TrimSpace(h[len("Bearer "):])
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.key)) == 1
}

var filesRE = regexp.MustCompile(`^/files/([A-Za-z0-9_-]+)$`)

func (s *v1Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m := filesRE.FindStringSubmatch(r.URL.Path); m != nil {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if !s.authorized(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		data, ok := s.files[m[1]]
		if ok && r.URL.Query().Get("consume") == "1" {
			delete(s.files, m[1])
		}
		s.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(data)
		return
	}
	switch {
	case r.RequestURI == "/health":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true,"name":"v1box","version":"0.1.0"}`))
		return
	case r.RequestURI == "/environment":
		s.envRequests.Add(1)
		if !s.authorized(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"name":"v1box","version":"0.1.0","base":"glovebox/base","fs":{"work":{"path":"/work","writable":true}},"packages":{},"limits":{"timeout":"5m"},"protocol_version":1}`))
		return
	case !wsconn.IsUpgrade(r):
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if !s.authorized(r) {
		// v1 writes a raw 401 and destroys the socket.
		hj, ok := w.(http.Hijacker)
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		c, _, err := hj.Hijack()
		if err == nil {
			c.Write([]byte("HTTP/1.1 401 Unauthorized\r\n\r\n"))
			c.Close()
		}
		return
	}
	ws, err := wsconn.Upgrade(w, r, wsconn.UpgradeOptions{})
	if err != nil {
		return
	}
	s.serveConn(ws, "http://"+r.Host)
}

// v1conn is one connection: writes are serialised by a mutex; prompts run
// one at a time in arrival order, as v1's promise chain does.
type v1conn struct {
	s       *v1Server
	ws      *wsconn.Conn
	origin  string
	wmu     sync.Mutex
	mu      sync.Mutex
	aborts  map[string]chan struct{}
	slots   map[string]chan json.RawMessage
	nslot   int
	queue   chan map[string]json.RawMessage
	dropped chan struct{}
}

func (c *v1conn) send(v map[string]any) {
	data, err := json.Marshal(v)
	if err != nil {
		c.s.t.Errorf("v1 server: marshal: %v", err)
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.WriteText(data)
}

func (s *v1Server) serveConn(ws *wsconn.Conn, origin string) {
	c := &v1conn{s: s, ws: ws, origin: origin, aborts: map[string]chan struct{}{},
		slots: map[string]chan json.RawMessage{}, queue: make(chan map[string]json.RawMessage, 64),
		dropped: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range c.queue {
			c.run(p)
		}
	}()
	defer func() {
		close(c.queue)
		c.mu.Lock()
		for _, ch := range c.aborts {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		c.mu.Unlock()
		close(c.dropped)
		wg.Wait()
		ws.Close()
	}()
	for {
		data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			continue // v1 ignores bad JSON
		}
		var typ, id string
		json.Unmarshal(m["type"], &typ)
		json.Unmarshal(m["id"], &id)
		s.mu.Lock()
		s.frames = append(s.frames, typ)
		s.mu.Unlock()
		switch typ {
		case "prompt":
			var text string
			json.Unmarshal(m["text"], &text)
			if text == "freeze" {
				<-s.thaw
				return
			}
			c.mu.Lock()
			c.aborts[id] = make(chan struct{})
			c.mu.Unlock()
			c.queue <- m
		case "abort":
			c.abort(id)
		case "display_resolve", "display_reject":
			c.answerSlot(typ, m)
		case "ping":
			c.send(map[string]any{"type": "pong", "ts": m["ts"]})
		}
		// hello and anything else: ignored, as v1 does.
	}
}

// abort notes an abort frame and aborts the prompt it names, if it runs.
func (c *v1conn) abort(id string) {
	c.s.mu.Lock()
	c.s.aborts = append(c.s.aborts, id)
	c.s.mu.Unlock()
	c.mu.Lock()
	if ch, ok := c.aborts[id]; ok {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	c.mu.Unlock()
}

// answerSlot hands a display_resolve's value, or a display_reject's
// error, to the prompt waiting on the slot.
func (c *v1conn) answerSlot(typ string, m map[string]json.RawMessage) {
	var slot string
	json.Unmarshal(m["slot_id"], &slot)
	val := m["value"]
	if typ == "display_reject" {
		val = json.RawMessage(`{"rejected":` + string(m["error"]) + `}`)
	}
	c.mu.Lock()
	ch := c.slots[slot]
	delete(c.slots, slot)
	c.mu.Unlock()
	if ch != nil {
		ch <- val
	}
}

// v1prompt is one prompt the v1 server runs: its connection, id, and the
// channel closed when it is aborted.
type v1prompt struct {
	c     *v1conn
	id    string
	abort chan struct{}
}

// event, complete and fail send the prompt's frames as v1 does.
func (p v1prompt) event(typ string, data any) {
	p.c.send(map[string]any{"type": "event", "id": p.id, "event_type": typ, "data": data})
}

func (p v1prompt) complete(msg string, outputs map[string]any) {
	if outputs == nil {
		outputs = map[string]any{}
	}
	p.c.send(map[string]any{"type": "complete", "id": p.id, "message": msg, "outputs": outputs})
}

func (p v1prompt) fail(code, msg string) {
	p.c.send(map[string]any{"type": "error", "id": p.id, "error": map[string]string{"code": code, "message": msg}})
}

// run runs a prompt's script: its first word names it, the rest is its
// argument.
func (c *v1conn) run(m map[string]json.RawMessage) {
	var id, text string
	json.Unmarshal(m["id"], &id)
	json.Unmarshal(m["text"], &text)
	c.mu.Lock()
	abort := c.aborts[id]
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.aborts, id)
		c.mu.Unlock()
	}()
	p := v1prompt{c: c, id: id, abort: abort}
	verb, arg, _ := strings.Cut(text, " ")
	switch verb {
	case "echo":
		for _, w := range strings.Fields(arg) {
			p.event("text_delta", map[string]string{"text": w})
		}
		p.complete(arg, nil)
	case "confirm":
		p.confirm()
	case "wait":
		p.event("text_delta", map[string]string{"text": "waiting"})
		<-abort
		p.fail("AbortError", "This operation was aborted")
	case "fail":
		p.fail("Error", "boom")
	case "malformed":
		// A complete frame whose outputs are not an object: no client can
		// decode it, but its id names the prompt.
		c.send(map[string]any{"type": "complete", "id": id, "message": "x", "outputs": 42})
	case "files", "urlout", "foreign":
		p.outputs(verb)
	case "inputs":
		p.inputs(m["inputs"])
	case "flood":
		var n int
		fmt.Sscan(arg, &n)
		p.flood(n)
	case "drop":
		p.event("text_delta", map[string]string{"text": "before the drop"})
		c.ws.Close()
		<-c.dropped
	default:
		p.fail("Error", "unknown script "+verb)
	}
}

// confirm pushes a confirm slot and completes with its answer.
func (p v1prompt) confirm() {
	c := p.c
	c.mu.Lock()
	c.nslot++
	slot := fmt.Sprintf("slot_%d", c.nslot)
	ch := make(chan json.RawMessage, 1)
	c.slots[slot] = ch
	c.mu.Unlock()
	c.send(map[string]any{"type": "display_push", "slot": map[string]any{"renderer": "confirm", "input": map[string]string{"q": "ok?"}, "id": slot}})
	select {
	case v := <-ch:
		c.send(map[string]any{"type": "display_clear", "slot_id": slot})
		p.complete(string(v), nil)
	case <-p.abort:
		p.fail("AbortError", "This operation was aborted")
	}
}

// outputs completes with the outputs a script names: "files" an inline
// and a 1MB server file, "urlout" a url ref, "foreign" a server ref on
// another origin.
func (p v1prompt) outputs(script string) {
	c := p.c
	switch script {
	case "files":
		big := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1MB
		c.s.mu.Lock()
		c.s.nextFile++
		fid := fmt.Sprintf("f%d", c.s.nextFile)
		c.s.files[fid] = big
		c.s.mu.Unlock()
		p.complete("two files", map[string]any{
			"small.txt": map[string]any{"kind": "inline", "name": "small.txt", "mime": "text/plain", "data": "aGkgdGhlcmU="},
			"big.bin":   map[string]any{"kind": "server", "name": "big.bin", "mime": "application/octet-stream", "size": len(big), "id": fid, "url": c.origin + "/files/" + fid},
		})
	case "urlout":
		p.complete("", map[string]any{
			"u.txt": map[string]any{"kind": "url", "name": "u.txt", "url": c.s.foreign + "/u.txt", "headers": map[string]string{"X-Token": "t0k"}},
		})
	case "foreign":
		c.s.mu.Lock()
		c.s.files["x"] = []byte("X")
		c.s.mu.Unlock()
		p.complete("", map[string]any{
			"x.bin": map[string]any{"kind": "server", "name": "x.bin", "mime": "application/octet-stream", "size": 1, "id": "x", "url": c.s.foreign + "/files/x"},
		})
	}
}

// inputs completes with the inputs it was sent, one name(kind,mime)=data
// each, sorted.
func (p v1prompt) inputs(raw json.RawMessage) {
	var inputs map[string]struct {
		Kind string `json:"kind"`
		Data string `json:"data"`
		Mime string `json:"mime"`
	}
	json.Unmarshal(raw, &inputs)
	var parts []string
	for name, in := range inputs {
		parts = append(parts, fmt.Sprintf("%s(%s,%s)=%s", name, in.Kind, in.Mime, in.Data))
	}
	sort.Strings(parts)
	p.complete(strings.Join(parts, " "), nil)
}

// flood sends n events of 1KB, then completes, unless aborted first.
func (p v1prompt) flood(n int) {
	chunk := strings.Repeat("x", 1024)
	for i := 0; i < n; i++ {
		select {
		case <-p.abort:
			p.fail("AbortError", "This operation was aborted")
			return
		default:
		}
		p.event("text_delta", map[string]string{"text": chunk})
	}
	p.complete("flooded", nil)
}

func (s *v1Server) abortsSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.aborts...)
}

func (s *v1Server) framesSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.frames...)
}
