package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

const testKey = "sk-real-secret-value-0123456789"

func TestCurlPolicy(t *testing.T) {
	o := startOutside(t)
	hp := fmt.Sprint(o.httpPort)
	b := startBox(t, o, protocol.NetworkSpec{
		Default: "deny",
		Allow:   []string{"outside.test", "*.gh.test", "198.51.100.0/24:" + hp, "rebind.test", "local.test"},
		Deny:    []string{"blocked.test"},
	})
	tests := []struct {
		name, url string
		allowed   bool
		rule      string
	}{
		{"allowed", "http://outside.test:" + hp + "/a", true, "outside.test"},
		{"wildcard", "http://cdn.gh.test:" + hp + "/b", true, "*.gh.test"},
		{"wildcard is not the apex", "http://gh.test:" + hp + "/", false, `default = "deny"`},
		{"cidr by address", "http://198.51.100.20:" + hp + "/c", true, "198.51.100.0/24:" + hp},
		{"cidr by name", "http://other.test:" + hp + "/d", true, "198.51.100.0/24:" + hp},
		{"deny wins", "http://blocked.test:" + hp + "/", false, "blocked.test"},
		{"default deny", "http://203.0.113.99:" + hp + "/", false, `default = "deny"`},
		{"rebinding to metadata", "http://rebind.test:" + hp + "/", false, "built-in: cloud metadata"},
		{"rebinding to loopback", "http://local.test:" + hp + "/", false, "built-in: loopback"},
		{"metadata address", "http://169.254.169.254/latest/meta-data/", false, "built-in: cloud metadata"},
		{"the kit's own port", "http://127.0.0.1:" + hp + "/", false, "built-in: loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := o.count()
			out, errOut, err := b.run(t, "curl", "-sS", "-i", "--noproxy", "", tt.url)
			ev := b.next(t)
			if ev.Rule != tt.rule || ev.Session != "s1" || ev.Proto != "http" {
				t.Errorf("event = %+v, want rule %q, session s1, proto http", ev, tt.rule)
			}
			if tt.allowed {
				if err != nil || !strings.Contains(out, "200 OK") || !strings.Contains(out, "hello from") {
					t.Fatalf("curl %s = %v, %q, %q; want 200 from the outside server", tt.url, err, out, errOut)
				}
				if ev.Decision != Allow || ev.BytesIn == 0 || ev.BytesOut == 0 {
					t.Errorf("event = %+v, want allow with bytes both ways", ev)
				}
				return
			}
			if !strings.Contains(out, "HTTP/1.1 451 Blocked by glovebox egress policy") {
				t.Fatalf("curl %s = %q, want a 451 from the proxy", tt.url, out)
			}
			if !strings.Contains(out, tt.rule) || !strings.Contains(out, "[network]") || !strings.Contains(out, "glovebox.toml") {
				t.Errorf("block message does not name the rule %q and how to allow it:\n%s", tt.rule, out)
			}
			if ev.Decision != Deny {
				t.Errorf("event = %+v, want deny", ev)
			}
			if o.count() != before {
				t.Errorf("a blocked request reached the outside server")
			}
		})
	}
}

func TestBlockMessageText(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny"})
	out, _, _ := b.run(t, "curl", "-sS", "http://api.outside.test:8080/v1")
	want := `glovebox: the connection to api.outside.test:8080 was blocked by this box's network policy.
Reason: no allow rule matches api.outside.test:8080 and the default is deny.
Rule: default = "deny"
To allow it, change [network] in the box's glovebox.toml (or ask the box's operator to change the policy at runtime):
  [network]
  allow = ["api.outside.test:8080"]   # or "api.outside.test" for every port, or "*.outside.test" for every subdomain of outside.test
Do not retry this connection unchanged: it will be blocked again.
`
	if out != want {
		t.Errorf("block message:\n%s\nwant:\n%s", out, want)
	}
}

func TestConnectBlockedReadable(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}})
	// curl prints the status of a failed CONNECT.
	_, errOut, err := b.run(t, "curl", "-sS", "https://api.outside.test:"+fmt.Sprint(o.httpsPort)+"/")
	if err == nil || !strings.Contains(errOut, "451") {
		t.Errorf("curl through a blocked CONNECT = %v, %q; want a failure naming 451", err, errOut)
	}
	if ev := b.next(t); ev.Decision != Deny || ev.Proto != "connect" {
		t.Errorf("event = %+v, want a denied connect", ev)
	}
	// Python prints the status line, which carries the rule.
	script := `import urllib.request, sys
try:
    urllib.request.urlopen(sys.argv[1], timeout=20)
except Exception as e:
    print(e)
`
	out, errOut, err := b.run(t, "python3", "-c", script, "https://api.outside.test:"+fmt.Sprint(o.httpsPort)+"/")
	if err != nil || !strings.Contains(out, `Tunnel connection failed: 451 Blocked by glovebox egress policy: api.outside.test:`) || !strings.Contains(out, `rule default = "deny"`) {
		t.Errorf("python through a blocked CONNECT = %v, %q, %q; want the block in the error", err, out, errOut)
	}
	b.next(t)
}

func TestSOCKSRawTCP(t *testing.T) {
	o := startOutside(t)
	ep := fmt.Sprint(o.echoPort)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny", Allow: []string{"echo.test:" + ep}})
	// A raw TCP client speaking SOCKS5 with a name, as a tool under
	// ALL_PROXY=socks5h:// does.
	script := `import os, socket, struct, sys, time
addr = os.environ["ALL_PROXY"].removeprefix("socks5h://")
host, port = addr.rsplit(":", 1)
def dial(name, p):
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    n = name.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(n)]) + n + struct.pack(">H", p))
    start = time.monotonic()
    rep = s.recv(10)
    return s, rep[1], time.monotonic() - start
s, code, _ = dial("echo.test", int(sys.argv[1]))
s.sendall(b"ping over raw tcp")
print("allowed", code, s.recv(100).decode())
s.close()
s, code, _ = dial("blocked.example", 5432)
print("denied", code)
`
	out, errOut, err := b.run(t, "python3", "-c", script, ep)
	if err != nil {
		t.Fatalf("python SOCKS client: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "allowed 0 ping over raw tcp") || !strings.Contains(out, "denied 2") {
		t.Errorf("SOCKS client printed %q, want an echo through the allowed tunnel and reply 2 (not allowed by ruleset) for the other", out)
	}
	ev1, ev2 := b.next(t), b.next(t)
	if ev1.Proto != "socks" || ev2.Proto != "socks" {
		t.Fatalf("events %+v %+v, want two socks events", ev1, ev2)
	}
	for _, ev := range []Event{ev1, ev2} {
		switch ev.Host {
		case "echo.test":
			if ev.Decision != Allow || ev.BytesOut != 17 || ev.BytesIn != 17 {
				t.Errorf("allowed event = %+v, want 17 bytes each way", ev)
			}
		case "blocked.example":
			if ev.Decision != Deny || ev.Rule != `default = "deny"` {
				t.Errorf("denied event = %+v", ev)
			}
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	// curl over socks5h names the refusal.
	_, errOut, err = b.run(t, "curl", "-sS", "-x", "socks5h://"+b.addr, "http://outside.test:"+fmt.Sprint(o.httpPort)+"/")
	if err == nil || !strings.Contains(errOut, "SOCKS5 connection to outside.test. (2)") {
		t.Errorf("curl over SOCKS to a denied host = %v, %q; want a refusal", err, errOut)
	}
	b.next(t)
}

func TestSetPolicy(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny"})
	url := fmt.Sprintf("http://outside.test:%d/", o.httpPort)
	out, _, _ := b.run(t, "curl", "-sS", "-i", url)
	if !strings.Contains(out, "451") {
		t.Fatalf("before: %q, want 451", out)
	}
	b.next(t)
	pol, err := NewPolicy(protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}})
	if err != nil {
		t.Fatal(err)
	}
	b.p.SetPolicy(pol)
	out, _, err = b.run(t, "curl", "-sS", "-i", url)
	if err != nil || !strings.Contains(out, "200 OK") {
		t.Fatalf("after SetPolicy: %v, %q, want 200", err, out)
	}
	b.next(t)
	if s := b.p.Stats(); s.Allowed != 1 || s.Denied != 1 || s.BytesIn == 0 {
		t.Errorf("Stats = %+v, want 1 allowed, 1 denied, bytes in", s)
	}
}

// TestKeepAliveRechecked: a policy change applies to the next request on
// a connection the client keeps alive.
func TestKeepAliveRechecked(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow"})
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	url := fmt.Sprintf("http://outside.test:%d/", o.httpPort)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: outside.test\r\n\r\n", url)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	// A deny rule by name, with the default still allow.
	pol, _ := NewPolicy(protocol.NetworkSpec{Default: "allow", Deny: []string{"outside.test"}})
	b.p.SetPolicy(pol)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: outside.test\r\n\r\n", url)
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 451 {
		t.Fatalf("second request after the policy change: %v %v, want 451", resp, err)
	}
}

// TestStreamingPassedOn: a streamed answer (server-sent events, as model
// APIs send) reaches the agent chunk by chunk, plain and brokered.
func TestStreamingPassedOn(t *testing.T) {
	o := startOutside(t)
	got := make(chan struct{})
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-got:
		case <-time.After(30 * time.Second): // past the client's timeout: a held-back first event fails the test
		}
		io.WriteString(w, "data: second\n\n")
	})
	plain := httptest.NewServer(stream)
	defer plain.Close()
	caCert, caKey := testCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), DNSNames: []string{"api.outside.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	tlsSrv := httptest.NewUnstartedServer(stream)
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	o.roots = roots
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow"}, Secret{Name: "K", Value: testKey, Hosts: []string{"api.outside.test"}, Port: tlsSrv.Listener.Addr().(*net.TCPAddr).Port})
	drained := make(chan struct{})
	defer close(drained)
	go func() { // the events are not what this test checks
		for {
			select {
			case <-b.events:
			case <-drained:
				return
			}
		}
	}()
	boxRoots := x509.NewCertPool()
	boxRoots.AppendCertsFromPEM(b.p.CACert())
	proxyURL, _ := url.Parse("http://" + b.addr)
	cl := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: boxRoots}}}
	for _, u := range []string{
		fmt.Sprintf("http://outside.test:%d/", plain.Listener.Addr().(*net.TCPAddr).Port),
		fmt.Sprintf("https://api.outside.test:%d/", tlsSrv.Listener.Addr().(*net.TCPAddr).Port),
	} {
		resp, err := cl.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		if err != nil || line != "data: first\n" {
			t.Fatalf("GET %s: first line %q, %v", u, line, err)
		}
		got <- struct{}{}
		rest, _ := io.ReadAll(br)
		resp.Body.Close()
		if string(rest) != "\ndata: second\n\n" {
			t.Errorf("GET %s: rest %q", u, rest)
		}
	}
}

// TestHostHeaderPinned: a forwarded request carries the Host the policy
// decided, not one the agent made up.
func TestHostHeaderPinned(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}})
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET http://outside.test:%d/h HTTP/1.1\r\nHost: metadata.internal\r\nConnection: close\r\n\r\n", o.httpPort)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf("hello from outside.test:%d/h\n", o.httpPort); string(body) != want {
		t.Errorf("upstream answered %q, want %q", body, want)
	}
	b.next(t)
}

// TestLimits: an endless request head is cut at 1MB, and a session over
// its connection cap gets new connections closed, not served.
func TestLimits(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow"})
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		fmt.Fprintf(c, "GET http://outside.test:%d/ HTTP/1.1\r\n", o.httpPort)
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for range 2000 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 2MB request head got %v, %v; want 431", resp, err)
	}

	pol, _ := NewPolicy(protocol.NetworkSpec{})
	p, err := New(Options{Policy: pol, Guard: testGuard, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln, Session{ID: "cap"}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	conns[2].SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conns[2].Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the third connection over a cap of 2 read %d, %v; want it closed (EOF)", n, err)
	}
	conns[0].SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := conns[0].Read(make([]byte, 1)); err == io.EOF {
		t.Errorf("the first connection was closed; want it served")
	}
}

// TestServeUnixListener: the proxy serves any net.Listener, such as the
// unix socket a session's network namespace is bridged to.
func TestServeUnixListener(t *testing.T) {
	t.Parallel()
	o := startOutside(t)
	pol, _ := NewPolicy(protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}})
	p, err := New(Options{Policy: pol, Guard: testGuard, Resolve: fakeDNS(testDNS), Dial: loopbackDial})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	events := make(chan Event, 10)
	go func() { done <- p.Serve(ctx, ln, Session{ID: "ns", Sink: func(e Event) { events <- e }}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	proxyURL, _ := url.Parse("http://proxy.invalid")
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(fmt.Sprintf("http://outside.test:%d/u", o.httpPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "hello from outside.test") {
		t.Errorf("through the unix socket: %d %q", resp.StatusCode, body)
	}
	resp, err = cl.Get(fmt.Sprintf("http://blocked.test:%d/", o.httpPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 451 {
		t.Errorf("blocked through the unix socket: %d, want 451", resp.StatusCode)
	}
	for range 2 {
		select {
		case e := <-events:
			if e.Session != "ns" {
				t.Errorf("event %+v, want session ns", e)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no egress event within 10s")
		}
	}
}

// TestServeEndsWithSilentUpstream: Serve returns when its context ends
// even while a request waits on an upstream that never answers.
func TestServeEndsWithSilentUpstream(t *testing.T) {
	t.Parallel()
	o := startOutside(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	defer silent.Close()
	defer close(release)
	pol, _ := NewPolicy(protocol.NetworkSpec{Default: "allow"})
	p, err := New(Options{Policy: pol, Guard: testGuard, Resolve: fakeDNS(testDNS), Dial: loopbackDial, RootCAs: o.roots})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln, Session{ID: "s"}) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://outside.test:%d/ HTTP/1.1\r\nHost: outside.test\r\n\r\n", silent.Listener.Addr().(*net.TCPAddr).Port)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the upstream within 10s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of its context ending while an upstream was silent")
	}
}
