package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// previewServer is a small HTTP server a session runs with node: GET
// answers its name, the request's URL and headers as JSON; a WebSocket
// upgrade echoes each text message back as "name:message".
const previewServer = `
const http = require('http'), crypto = require('crypto');
const [port, name] = process.argv.slice(2);
const s = http.createServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({name, url: req.url, headers: req.headers}));
});
s.on('upgrade', (req, sock) => {
  const acc = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + acc + '\r\n\r\n');
  let buf = Buffer.alloc(0);
  sock.on('error', () => {});
  sock.on('data', d => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (buf.length < 2) return;
      const op = buf[0] & 15, masked = buf[1] & 128;
      let len = buf[1] & 127, off = 2;
      if (len == 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
      else if (len == 127) { sock.destroy(); return; }
      const mk = masked ? buf.subarray(off, off + 4) : null;
      if (masked) off += 4;
      if (buf.length < off + len) return;
      const p = Buffer.from(buf.subarray(off, off + len));
      if (mk) for (let i = 0; i < len; i++) p[i] ^= mk[i % 4];
      buf = buf.subarray(off + len);
      if (op == 8) { sock.end(Buffer.from([0x88, 0])); return; }
      const out = Buffer.from(name + ':' + p.toString());
      const h = out.length < 126 ? Buffer.from([0x81, out.length]) : Buffer.from([0x81, 126, out.length >> 8, out.length & 255]);
      sock.write(Buffer.concat([h, out]));
    }
  });
});
s.listen(+port, '127.0.0.1', () => console.log('listening on ' + port));
`

const previewDomain = "preview.test"

// withPreview serves previews under previewDomain, over http.
func withPreview(m *protocol.Manifest, _ *Options) {
	m.Preview = &protocol.PreviewSpec{Domain: previewDomain, HTTP: true}
}

// serveInSession starts the node server in c's session, named name, and
// waits until it listens: on port, or with port 0 on the session's own
// port ($PORT, where sessions share the host's loopback). It returns the
// port. The prompt runs until the session ends.
func serveInSession(t *testing.T, b *box, c *v1client, port int, name string) int {
	t.Helper()
	arg := strconv.Itoa(port)
	if port == 0 {
		arg = `"$PORT"`
	}
	promptWith(c, "srv", fmt.Sprintf(`exec node "$GLOVEBOX_INPUT/srv.js" %s %s`, arg, name), map[string]any{"srv.js": inline(previewServer)})
	c.until(func(m map[string]any) bool {
		if m["id"] == "srv" && (m["type"] == "complete" || m["type"] == "error") {
			t.Fatalf("the server in the session ended: %v", m)
		}
		return m["type"] == "event" && strings.Contains(fmt.Sprint(m), "listening on")
	})
	if port == 0 {
		return sessionPort(t, b, c)
	}
	return port
}

// sessionPort is the session's own preview port (mode "port").
func sessionPort(t *testing.T, b *box, c *v1client) int {
	t.Helper()
	info, err := b.srv.live.lookup(c.hello["session_id"].(string)).sandboxed()
	if err != nil {
		t.Fatal(err)
	}
	if info.Sandbox.ListenPort == 0 {
		t.Fatal("the session has no preview port")
	}
	return info.Sandbox.ListenPort
}

// mintPreview asks for a link to port in session id with header's
// credential and returns it.
func (b *box) mintPreview(id string, header http.Header, body string) (protocol.Preview, int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.url+"/sessions/"+id+"/previews", strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var p protocol.Preview
	if resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(data, &p); err != nil {
			b.t.Fatalf("POST previews: %v in %s", err, data)
		}
	}
	return p, resp.StatusCode, string(data)
}

// previewRequest sends a request to a preview URL (whose host is under
// previewDomain) to the box, with the URL's host in the Host header.
func (b *box) previewRequest(method, rawURL string, header http.Header) (*http.Response, string) {
	b.t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		b.t.Fatal(err)
	}
	host := u.Host
	u.Host = strings.TrimPrefix(b.url, "http://")
	req, _ := http.NewRequestWithContext(testkit.Context(b.t, "a preview request"), method, u.String(), nil)
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

// previewWS opens a WebSocket to a preview URL with header.
func (b *box) previewWS(rawURL string, header http.Header) (*wsconn.Conn, int, error) {
	b.t.Helper()
	u, _ := url.Parse(rawURL)
	h := http.Header{"Host": {u.Host}}
	for k, v := range header {
		h[k] = v
	}
	c, resp, err := wsconn.Dial(testkit.Context(b.t, "a preview's WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+u.Path, wsconn.DialOptions{Header: h})
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	return c, status, err
}

type echoed struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// TestPreviewHTTPAndWebSocket: a server in a real session is reached
// through its link, over HTTP and WebSocket; the link becomes a cookie;
// the box's credentials never reach the app.
func TestPreviewHTTPAndWebSocket(t *testing.T) {
	for _, mode := range previewModes {
		t.Run(mode, func(t *testing.T) { testPreviewHTTPAndWebSocket(t, mode) })
	}
}

func testPreviewHTTPAndWebSocket(t *testing.T, mode string) {
	b := newPreviewBox(t, mode)
	a := b.dial("/", nil)
	sid := a.hello["session_id"].(string)
	if !hasCap(a.hello, protocol.CapPreview) {
		t.Fatalf("hello capabilities %v lack %q", a.hello["capabilities"], protocol.CapPreview)
	}
	port := 8000
	if mode != "netns" {
		port = 0
	}
	port = serveInSession(t, b, a, port, "A")

	p, code, body := b.mintPreview(sid, b.auth(), fmt.Sprintf(`{"port":%d,"ttl":"10m"}`, port))
	if code != http.StatusCreated {
		t.Fatalf("POST previews = %d %s, want 201", code, body)
	}
	origin := "http://" + p.ID + "." + previewDomain + strings.TrimPrefix(b.url, "http://127.0.0.1")
	if p.Session != sid || p.Port != port || !strings.HasPrefix(p.URL, origin+"/?"+protocol.PreviewQuery+"=") || p.Link == "" {
		t.Fatalf("POST previews = %+v, want a link to %s:%d at %s", p, sid, port, origin)
	}

	// The first visit trades the link for a cookie and drops it from the URL.
	resp, body := b.previewRequest("GET", strings.Replace(p.URL, "/?", "/page?x=1&", 1), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/page?x=1" {
		t.Fatalf("first visit = %d Location %q %s, want 303 to /page?x=1", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == protocol.PreviewCookie {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Domain != "" || cookie.Path != "/" {
		t.Fatalf("first visit's cookie = %+v, want a host-only HttpOnly SameSite=Lax cookie", cookie)
	}

	// With the cookie (and the app's own), the app answers; it sees
	// neither the link nor the box's credentials.
	resp, body = b.previewRequest("GET", origin+"/page?x=1", http.Header{
		"Cookie":        {"app=1; " + protocol.PreviewCookie + "=" + cookie.Value},
		"Authorization": {"Bearer " + b.key},
	})
	var e echoed
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with the cookie = %d %s (%v), want the app's answer", resp.StatusCode, body, err)
	}
	if e.Name != "A" || e.URL != "/page?x=1" || e.Headers["cookie"] != "app=1" || e.Headers["authorization"] != "" ||
		e.Headers["x-forwarded-host"] != p.ID+"."+previewDomain+strings.TrimPrefix(b.url, "http://127.0.0.1") {
		t.Errorf("the app saw %+v, want name A, url /page?x=1, only its own cookie, no Authorization, X-Forwarded-Host the preview's", e)
	}

	// An API client sends the link as a bearer.
	resp, body = b.previewRequest("GET", origin+"/api", bearer(p.Link))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"name":"A"`) || strings.Contains(body, "authorization") {
		t.Errorf("GET with the link as bearer = %d %s, want A's answer without the header", resp.StatusCode, body)
	}

	// WebSocket, with the cookie.
	ws, status, err := b.previewWS(origin+"/ws", http.Header{"Cookie": {protocol.PreviewCookie + "=" + cookie.Value}})
	if err != nil {
		t.Fatalf("WebSocket through the preview: %v (status %d)", err, status)
	}
	if err := ws.WriteText([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	msg, err := ws.ReadMessage()
	if err != nil || string(msg) != "A:ping" {
		t.Errorf("WebSocket echo = %q, %v, want A:ping", msg, err)
	}
	ws.Close()
	if _, status, err := b.previewWS(origin+"/ws", nil); err == nil || status != http.StatusUnauthorized {
		t.Errorf("WebSocket without the link: status %d, err %v, want 401", status, err)
	}

	// GET lists the link without its credential.
	resp2, data := b.get("/sessions/"+sid+"/previews", b.auth())
	var list protocol.PreviewList
	if err := json.Unmarshal(data, &list); err != nil || resp2.StatusCode != 200 || len(list.Previews) != 1 || list.Previews[0].Link != "" || list.Previews[0].URL != origin+"/" {
		t.Errorf("GET previews = %d %s, want the one link without its credential", resp2.StatusCode, data)
	}

	// A WebSocket through the preview ends with the session.
	ws, _, err = b.previewWS(origin+"/ws", http.Header{"Cookie": {protocol.PreviewCookie + "=" + cookie.Value}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	a.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	testkit.Wait(t, done, "the preview's WebSocket to end with its session")
}

func TestSameHostURI(t *testing.T) {
	for in, want := range map[string]string{
		"/page?x=1&glovebox_preview=L":      "/page?x=1",
		"/?glovebox_preview=L":              "/",
		"//evil.example/x?glovebox_preview": "/evil.example/x",
		"/\\evil.example/x":                 "/%5Cevil.example/x", // a backslash, escaped: never a slash
		"/a%2Fb?q=%20&glovebox_preview=L&z": "/a%2Fb?q=%20&z",
	} {
		u, err := url.ParseRequestURI(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameHostURI(u); got != want {
			t.Errorf("sameHostURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPreviewConnLimit: a session's connections to its ports are bounded;
// one more waits for a slot, and gets one when a connection closes.
func TestPreviewConnLimit(t *testing.T) {
	pc := &previewConns{sem: make(chan struct{}, maxPreviewConns), open: map[*previewConn]struct{}{}, tr: &http.Transport{}}
	var ends []net.Conn
	connect := func(context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		ends = append(ends, b)
		return a, nil
	}
	var conns []net.Conn
	for range maxPreviewConns {
		c, err := pc.dial(t.Context(), connect)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if c, err := pc.dial(ctx, connect); err == nil {
		c.Close()
		t.Fatalf("connection %d: no error, want the limit", maxPreviewConns+1)
	}
	conns[0].Close()
	c, err := pc.dial(t.Context(), connect)
	if err != nil {
		t.Fatalf("a connection after one closed: %v", err)
	}
	conns = append(conns[1:], c)
	// The session's end closes every one.
	pc.close()
	for i, c := range conns {
		if _, err := c.Write([]byte("x")); err == nil {
			t.Errorf("connection %d still open after the session ended", i)
		}
	}
	for _, e := range ends {
		e.Close()
	}
	if n := len(pc.sem); n != 0 {
		t.Errorf("%d slots taken after every connection closed", n)
	}
}

// TestPreviewRefusals: forged, foreign, revoked, expired and dead-session
// links; hosts under the preview domain never reach the box's routes.
func TestPreviewRefusals(t *testing.T) {
	for _, mode := range previewModes {
		t.Run(mode, func(t *testing.T) { testPreviewRefusals(t, mode) })
	}
}

func testPreviewRefusals(t *testing.T, mode string) {
	b := newPreviewBox(t, mode)
	a, c := b.dial("/", nil), b.dial("/", nil)
	aid, cid := a.hello["session_id"].(string), c.hello["session_id"].(string)
	portA, portC := 8000, 8001
	if mode != "netns" {
		portA, portC = 0, 0
	}
	portA = serveInSession(t, b, a, portA, "A")
	portC = serveInSession(t, b, c, portC, "C")
	pa, code, body := b.mintPreview(aid, b.auth(), fmt.Sprintf(`{"port":%d}`, portA))
	if code != http.StatusCreated {
		t.Fatalf("POST = %d %s", code, body)
	}
	pc, _, _ := b.mintPreview(cid, b.auth(), fmt.Sprintf(`{"port":%d}`, portC))
	originA, originC := strings.Split(pa.URL, "?")[0], strings.Split(pc.URL, "?")[0]
	ok := func(origin, link, want string) {
		t.Helper()
		resp, body := b.previewRequest("GET", origin, bearer(link))
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"name":"`+want+`"`) {
			t.Errorf("GET %s = %d %s, want %s's answer", origin, resp.StatusCode, body, want)
		}
	}
	refused := func(what, origin string, h http.Header, want int) {
		t.Helper()
		resp, body := b.previewRequest("GET", origin, h)
		if resp.StatusCode != want || strings.Contains(body, `"name"`) {
			t.Errorf("%s: GET %s = %d %s, want %d", what, origin, resp.StatusCode, body, want)
		}
	}
	ok(originA, pa.Link, "A")
	ok(originC, pc.Link, "C")
	refused("C's link on A's host", originA, bearer(pc.Link), http.StatusUnauthorized)
	refused("A's link on C's host", originC, bearer(pa.Link), http.StatusUnauthorized)
	refused("A's link as C's cookie", originC, http.Header{"Cookie": {protocol.PreviewCookie + "=" + pa.Link}}, http.StatusUnauthorized)
	refused("no link", originA, nil, http.StatusUnauthorized)
	forged := pa.Link[:len(pa.Link)-4] + "AAAA"
	refused("a forged link", originA, bearer(forged), http.StatusUnauthorized)
	other, _ := protocol.MintPreviewLink(protocol.NewKey(), protocol.PreviewClaims{ID: pa.ID, Session: aid, Port: portA, Expires: time.Now().Add(time.Hour)})
	refused("a link of another key", originA, bearer(other), http.StatusUnauthorized)
	refused("the box key", originA, b.auth(), http.StatusUnauthorized)
	for _, host := range []string{previewDomain, "nope." + previewDomain, "a.b." + previewDomain} {
		req := "http://" + host + "/health"
		refused("the box's routes under the preview domain ("+host+")", req, b.auth(), http.StatusNotFound)
	}

	// A session never reaches another's port through its own link.
	switch mode {
	case "netns":
		// The port number names a port of A's own loopback, where nothing
		// listens: never C's server.
		cross, code, _ := b.mintPreview(aid, b.auth(), fmt.Sprintf(`{"port":%d}`, portC))
		if code != http.StatusCreated {
			t.Fatalf("POST = %d", code)
		}
		refused("A's link to C's port number", strings.Split(cross.URL, "?")[0], bearer(cross.Link), http.StatusBadGateway)
	default:
		// A may preview its own port only, and may not listen on C's.
		if _, code, body := b.mintPreview(aid, b.auth(), fmt.Sprintf(`{"port":%d}`, portC)); code != http.StatusBadRequest {
			t.Errorf("POST for C's port in A = %d %s, want 400", code, body)
		}
		// Another session may not listen on C's port (Landlock refuses the
		// bind, before the address is found in use).
		d := b.dial("/", nil)
		d.prompt("squat", fmt.Sprintf(`node -e 'require("net").createServer().listen(%d, "127.0.0.1").on("error", e => { console.log("refused: " + e.code); process.exit(3) })'`, portC))
		if m := last(d.finish("squat")); !strings.Contains(fmt.Sprint(m), "refused: EACCES") {
			t.Errorf("another session listening on C's port: %v, want EACCES", m)
		}
		if mode != "port" {
			// With one uid for every session the kit cannot tell a
			// listener's owner: Landlock keeps other sessions off the
			// port, and nothing else in the box listens in the range.
			break
		}
		// A listener on D's port that is not D's (here the test's own, as
		// root) is never reached through D's link.
		portD := sessionPort(t, b, d)
		squatter, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", portD))
		if err != nil {
			t.Fatal(err)
		}
		defer squatter.Close()
		go func() {
			for {
				c, err := squatter.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"name\":\"evil\"}")
				c.Close()
			}
		}()
		pd := mustMint(t, b, d.hello["session_id"].(string), portD)
		refused("a link to a port another uid holds", strings.Split(pd.URL, "?")[0], bearer(pd.Link), http.StatusBadGateway)
	}

	// Credentials for the routes: a connect token of another subject does
	// not reach A's previews; a preview-scoped token does.
	if _, code, _ := b.mintPreview(aid, bearer(b.token(protocol.ScopeConnect)), fmt.Sprintf(`{"port":%d}`, portA)); code != http.StatusNotFound {
		t.Errorf("POST with another identity's connect token = %d, want 404", code)
	}
	if _, code, body := b.mintPreview(aid, bearer(b.token(protocol.ScopePreview)), fmt.Sprintf(`{"port":%d}`, portA)); code != http.StatusCreated {
		t.Errorf("POST with a preview token = %d %s, want 201", code, body)
	}
	for _, bad := range []string{`{"port":0}`, `{"port":70000}`, `{"port":80,"ttl":"30d"}`, `{"port":80,"ttl":"x"}`, `{"port":80,"extra":1}`, `[`} {
		if _, code, _ := b.mintPreview(aid, b.auth(), bad); code != http.StatusBadRequest {
			t.Errorf("POST %s = %d, want 400", bad, code)
		}
	}

	// Revoked: 410, and gone from the list.
	req, _ := http.NewRequest(http.MethodDelete, b.url+"/sessions/"+aid+"/previews/"+pa.ID, nil)
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %v %v, want 204", resp, err)
	}
	resp.Body.Close()
	refused("a revoked link", originA, bearer(pa.Link), http.StatusGone)
	if resp, _ := b.previewRequest("DELETE", b.url+"/sessions/"+cid+"/previews/"+pa.ID, b.auth()); resp.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE of A's link under C = %d, want 404", resp.StatusCode)
	}

	// Expired: 410.
	b.srv.preview.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	refused("an expired link", originC, bearer(pc.Link), http.StatusGone)
	b.srv.preview.now = time.Now

	// The session ended: 410.
	pc2, _, _ := b.mintPreview(cid, b.auth(), fmt.Sprintf(`{"port":%d}`, portC))
	c.close()
	waitFor(t, "C's end", func() bool { return b.srv.live.lookup(cid) == nil })
	refused("a link to an ended session", strings.Split(pc2.URL, "?")[0], bearer(pc2.Link), http.StatusGone)
	fresh := mustMint(t, b, aid, portA)
	ok(strings.Split(fresh.URL, "?")[0], fresh.Link, "A")
}

func mustMint(t *testing.T, b *box, sid string, port int) protocol.Preview {
	t.Helper()
	p, code, body := b.mintPreview(sid, b.auth(), fmt.Sprintf(`{"port":%d}`, port))
	if code != http.StatusCreated {
		t.Fatalf("POST = %d %s", code, body)
	}
	return p
}

// TestPreviewOff: a box without a preview domain announces no capability
// and answers the routes with why.
func TestPreviewOff(t *testing.T) {
	b := newBox(t, exec.New())
	c := b.dial("/", nil)
	if hasCap(c.hello, protocol.CapPreview) {
		t.Errorf("capabilities %v announce previews without a domain", c.hello["capabilities"])
	}
	_, code, body := b.mintPreview(c.hello["session_id"].(string), b.auth(), `{"port":80}`)
	if code != http.StatusNotImplemented || !strings.Contains(body, "[preview] domain") {
		t.Errorf("POST previews = %d %s, want 501 saying to set the domain", code, body)
	}

}

// TestPreviewOffUnconfined: sessions on the host's loopback with neither
// Landlock's network rules nor a uid each get no previews, and hosts
// under the domain still never reach the box's routes.
func TestPreviewOffUnconfined(t *testing.T) {
	b := newBox(t, exec.New(), withPreview, func(m *protocol.Manifest, _ *Options) {
		m.Sandbox = &protocol.SandboxSpec{Network: new(false), Landlock: new(false), Users: new(false), AllowDegraded: true}
	})
	c := b.dial("/", nil)
	if hasCap(c.hello, protocol.CapPreview) {
		t.Errorf("capabilities %v announce previews where sessions share a loopback unconfined", c.hello["capabilities"])
	}
	_, code, body := b.mintPreview(c.hello["session_id"].(string), b.auth(), `{"port":80}`)
	if code != http.StatusNotImplemented || !strings.Contains(body, "share the host's loopback") {
		t.Errorf("POST previews = %d %s, want 501 saying why", code, body)
	}
	if resp, _ := b.previewRequest("GET", "http://abcdefgh."+previewDomain+"/health", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /health under the preview domain = %d, want 404", resp.StatusCode)
	}
}

func hasCap(hello map[string]any, c string) bool {
	caps, _ := hello["capabilities"].([]any)
	for _, x := range caps {
		if x == c {
			return true
		}
	}
	return false
}

var _ = bytes.NewReader
var _ = net.Dial
var _ = context.Background

// previewModes are the ways a box reaches its sessions' ports: inside
// each session's network namespace, or on the host's loopback where each
// session has a port of its own.
var previewModes = []string{"netns", "port", "port-one-uid"}

// previewSandbox is the sandbox of mode: every layer ("netns"); no
// network namespace ("port"); and, as a non-root kit runs sessions,
// neither a network namespace nor a uid each, Landlock alone keeping
// each session's port its own ("port-one-uid").
func previewSandbox(mode string) *protocol.SandboxSpec {
	switch mode {
	case "port":
		return &protocol.SandboxSpec{Network: new(false)}
	case "port-one-uid":
		return &protocol.SandboxSpec{Network: new(false), Users: new(false)}
	}
	return nil
}

// newPreviewBox is a box with previews and the exec agent, reaching
// sessions' ports in mode.
func newPreviewBox(t *testing.T, mode string) *box {
	t.Helper()
	var opts []boxOpt
	if sb := previewSandbox(mode); sb != nil {
		opts = append(opts, func(m *protocol.Manifest, o *Options) { m.Sandbox = sb })
	}
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), append([]boxOpt{withPreview}, opts...)...)
	if !b.srv.preview.enabled() {
		t.Skipf("no previews in mode %s here: %s", mode, b.srv.preview.off)
	}
	if got := b.srv.preview.ports != nil; got != (mode != "netns") {
		t.Fatalf("mode %s: the box chose mode port %v", mode, got)
	}
	return b
}

// TestPreviewFlyReplay: on Fly, a link to another machine's session is
// replayed there, once.
func TestPreviewFlyReplay(t *testing.T) {
	key := protocol.NewKey()
	p := &previews{key: key, domain: previewDomain, machine: "a1a1", now: time.Now, live: &live{}, links: map[string]*previewLink{}}
	link, _ := protocol.MintPreviewLink(key, protocol.PreviewClaims{ID: "abcdefgh", Session: "b2b2_x", Port: 3000, Expires: time.Now().Add(time.Hour)})
	for _, tc := range []struct {
		src  string
		want int
	}{{"", http.StatusConflict}, {"instance=b2b2", http.StatusGone}} {
		r, _ := http.NewRequest(http.MethodGet, "http://abcdefgh."+previewDomain+"/", nil)
		r.Header.Set("Authorization", "Bearer "+link)
		if tc.src != "" {
			r.Header.Set(FlyReplaySrcHeader, tc.src)
		}
		w := httptest.NewRecorder()
		if !p.serveHost(w, r) {
			t.Fatal("serveHost did not take a preview host")
		}
		if w.Code != tc.want || (tc.want == http.StatusConflict) != (w.Header().Get(FlyReplayHeader) == "instance=b2b2") {
			t.Errorf("src %q: %d fly-replay %q, want %d", tc.src, w.Code, w.Header().Get(FlyReplayHeader), tc.want)
		}
	}
}

// TestPreviewEgressUnaffected: with an egress policy, a session whose
// port is previewed still reaches the outside only through the proxy,
// and only what the policy allows; a direct connect to a port of the
// host stays refused.
func TestPreviewEgressUnaffected(t *testing.T) {
	for _, mode := range previewModes {
		t.Run(mode, func(t *testing.T) {
			opts := []boxOpt{withPreview}
			if sb := previewSandbox(mode); sb != nil {
				opts = append(opts, func(m *protocol.Manifest, _ *Options) { m.Sandbox = sb })
			}
			b, outside, _ := egressBoxWith(t, opts...)
			if !b.srv.preview.enabled() {
				t.Skipf("no previews in mode %s here: %s", mode, b.srv.preview.off)
			}
			oport := outside.Listener.Addr().(*net.TCPAddr).Port
			a, probe := b.dial("/", nil), b.dial("/", nil)
			port := 8000
			if mode != "netns" {
				port = 0
			}
			port = serveInSession(t, b, a, port, "A")
			p := mustMint(t, b, a.hello["session_id"].(string), port)
			if resp, body := b.previewRequest("GET", strings.Split(p.URL, "?")[0], bearer(p.Link)); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"name":"A"`) {
				t.Errorf("GET through the preview = %d %s, want A's answer", resp.StatusCode, body)
			}
			// A session of the same box: allowed host through the proxy,
			// blocked host refused, the host's port unreachable directly.
			probe.prompt("p", fmt.Sprintf(`curl -sS http://outside.test:%d/; curl -sS http://blocked.test:%d/ || echo blocked;
node -e 'require("net").connect(%d, "127.0.0.1").on("connect", () => { console.log("direct: connected"); process.exit(0) }).on("error", e => { console.log("direct: " + e.code); process.exit(0) })'`, oport, oport, oport))
			m := last(probe.finish("p"))
			msg := fmt.Sprint(m["message"])
			t.Logf("the probe session: %s", msg)
			if m["type"] != "complete" || !strings.Contains(msg, "hello from outside") || !strings.Contains(msg, "blocked") || strings.Contains(msg, "direct: connected") {
				t.Errorf("egress from a session of a box with previews: %v, want the allowed host, the blocked one refused, no direct connect", m)
			}
		})
	}
}

// TestPreviewLinkBounds: a session holds at most maxPreviewLinks live
// links, and maxPreviewKept with the revoked ones kept to answer 410.
func TestPreviewLinkBounds(t *testing.T) {
	b := newBox(t, scripted(nil), withPreview)
	if !b.srv.preview.enabled() {
		t.Skip(b.srv.preview.off)
	}
	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	var ids []string
	for range maxPreviewLinks {
		ids = append(ids, mustMint(t, b, sid, 3000).ID)
	}
	if _, code, body := b.mintPreview(sid, b.auth(), `{"port":3000}`); code != http.StatusTooManyRequests {
		t.Fatalf("link %d = %d %s, want 429", maxPreviewLinks+1, code, body)
	}
	revoke := func(id string) {
		t.Helper()
		if resp, _ := b.previewRequest("DELETE", b.url+"/sessions/"+sid+"/previews/"+id, b.auth()); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE %s = %d", id, resp.StatusCode)
		}
	}
	for n := maxPreviewLinks; n < maxPreviewKept; n++ {
		revoke(ids[0])
		ids = append(ids[1:], mustMint(t, b, sid, 3000).ID)
	}
	revoke(ids[0])
	if _, code, body := b.mintPreview(sid, b.auth(), `{"port":3000}`); code != http.StatusTooManyRequests || !strings.Contains(body, "revoked ones included") {
		t.Errorf("a link past %d kept = %d %s, want 429", maxPreviewKept, code, body)
	}
}
