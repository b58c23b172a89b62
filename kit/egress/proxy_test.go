package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// outside is the world beyond the box, on loopback: an HTTP server, an
// HTTPS server with a certificate from its own test CA, and a raw TCP
// echo server. Names resolve (through the proxy's resolver seam) to
// TEST-NET addresses, which the dialer seam maps back to loopback.
type outside struct {
	httpPort, httpsPort, echoPort int
	roots                         *x509.CertPool
	rootsPEM                      []byte
	caCert                        *x509.Certificate
	caKey                         *ecdsa.PrivateKey

	mu   sync.Mutex
	seen []http.Header // what the servers received, in order
}

// testAddrs are what the test names resolve to.
var testDNS = map[string][]string{
	"outside.test":     {"203.0.113.10"},
	"api.outside.test": {"203.0.113.11"},
	"cdn.gh.test":      {"203.0.113.12"},
	"gh.test":          {"203.0.113.13"},
	"blocked.test":     {"203.0.113.14"},
	"other.test":       {"198.51.100.20"},
	"rebind.test":      {"169.254.169.254"},
	"local.test":       {"127.0.0.1"},
	"echo.test":        {"203.0.113.15"},
}

func startOutside(t testing.TB) *outside {
	t.Helper()
	o := &outside{}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok { // for the benchmarks
			size, _ := strconv.Atoi(n)
			w.Header().Set("Content-Length", n)
			buf := make([]byte, 64<<10)
			for size > 0 {
				k, err := w.Write(buf[:min(size, len(buf))])
				if err != nil {
					return
				}
				size -= k
			}
			return
		}
		if r.URL.Path == "/small" {
			io.WriteString(w, "ok\n")
			return
		}
		o.mu.Lock()
		o.seen = append(o.seen, r.Header.Clone())
		o.mu.Unlock()
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "hello from %s%s\n", r.Host, r.URL.Path)
	})
	hs := httptest.NewServer(record)
	t.Cleanup(hs.Close)
	o.httpPort = hs.Listener.Addr().(*net.TCPAddr).Port

	o.caCert, o.caKey = testCA(t)
	o.rootsPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: o.caCert.Raw})
	o.roots = x509.NewCertPool()
	o.roots.AddCert(o.caCert)
	ts := httptest.NewUnstartedServer(record)
	ts.TLS = o.tlsConfig(t)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	o.httpsPort = ts.Listener.Addr().(*net.TCPAddr).Port

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.echoPort = ln.Addr().(*net.TCPAddr).Port
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	return o
}

// tlsConfig is an outside server's TLS: a certificate for the test names
// from the outside test CA.
func (o *outside) tlsConfig(t testing.TB) *tls.Config {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.outside.test"},
		DNSNames:  []string{"api.outside.test", "outside.test", "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, o.caCert, &key.PublicKey, o.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func (o *outside) lastSeen(t *testing.T) http.Header {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		t.Fatal("the outside servers received no request")
	}
	return o.seen[len(o.seen)-1]
}

func (o *outside) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

func testCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outside test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

// loopbackDial maps the TEST-NET addresses the test names resolve to
// back to loopback, where the outside servers are.
func loopbackDial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil, err
	}
	if !netip.MustParsePrefix("203.0.113.0/24").Contains(a) && !netip.MustParsePrefix("198.51.100.0/24").Contains(a) {
		return nil, fmt.Errorf("test dialer: %s is not a test address", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
}

// box is a proxy serving one session on a loopback port, with its events.
type box struct {
	p      *Proxy
	addr   string
	bundle string // the CA bundle file agents trust
	events chan Event
	rules  *SessionRules // the session's own rules
}

const testKey = "sk-real-secret-value-0123456789"

func startBox(t testing.TB, o *outside, spec protocol.NetworkSpec, secrets ...Secret) *box {
	t.Helper()
	return startBoxWith(t, spec, Options{
		Guard: testGuard, Secrets: secrets,
		Resolve: fakeDNS(testDNS), Dial: loopbackDial, RootCAs: o.roots,
	})
}

// startBoxWith starts a box with opts, its policy made from spec.
func startBoxWith(t testing.TB, spec protocol.NetworkSpec, opts Options) *box {
	t.Helper()
	t.Cleanup(func() { checkLeaks(t) }) // runs after Serve has returned
	pol, err := NewPolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	opts.Policy, opts.Seed, opts.Logger = pol, "box-1", testkit.Logger(t, slog.LevelInfo)
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &box{p: p, addr: ln.Addr().String(), events: make(chan Event, 1000), rules: &SessionRules{}}
	b.bundle = filepath.Join(t.TempDir(), "ca-bundle.crt")
	if err := p.WriteBundle(b.bundle, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Serve(ctx, ln, Session{ID: "s1", Sink: func(e Event) { b.events <- e }, Rules: b.rules})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of its context ending")
		}
	})
	return b
}

// env is the environment a sandboxed agent process gets: the test's own
// (for PATH and pyenv) without any proxy variables, plus the proxy's.
func (b *box) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "ANTHROPIC_API_KEY":
			continue
		}
		env = append(env, kv)
	}
	return append(env, b.p.Env(b.addr, b.bundle)...)
}

// run runs a client program as an agent would, with a deadline.
func (b *box) run(t *testing.T, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if _, lerr := exec.LookPath(name); lerr != nil {
		t.Fatalf("%s is not installed: the egress tests need real curl, python3 and node clients", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = b.env()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish within 30s (a blocked connection must fail at once): stderr %s", name, args, e.String())
	}
	return o.String(), e.String(), err
}

// next waits for the next event.
func (b *box) next(t *testing.T) Event {
	t.Helper()
	return testkit.Recv(t, b.events, "the next egress event")
}

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

func TestBrokering(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny", Allow: []string{"api.outside.test", "outside.test"}},
		Secret{Name: "ANTHROPIC_API_KEY", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key", Port: o.httpsPort})
	ph := b.p.Placeholders()["ANTHROPIC_API_KEY"]
	if !strings.HasPrefix(ph, "glovebox-placeholder-ANTHROPIC_API_KEY-") || ph != Placeholder("box-1", "ANTHROPIC_API_KEY") {
		t.Fatalf("placeholder = %q", ph)
	}
	for _, kv := range b.env() {
		if strings.Contains(kv, testKey) {
			t.Fatalf("the real key is in the agent env: %s", kv)
		}
	}
	https := fmt.Sprintf("https://api.outside.test:%d/v1/messages", o.httpsPort)
	check := func(t *testing.T, client string, header, want string) {
		t.Helper()
		got := o.lastSeen(t).Get(header)
		if got != want {
			t.Errorf("%s: the upstream saw %s %q, want %q", client, header, got, want)
		}
	}

	t.Run("curl", func(t *testing.T) {
		out, errOut, err := b.run(t, "curl", "-sS", "-H", "x-api-key: "+ph, "-H", "x-leak: "+ph, https)
		if err != nil || !strings.Contains(out, "hello from api.outside.test") {
			t.Fatalf("curl = %v, %q, %q", err, out, errOut)
		}
		check(t, "curl", "X-Api-Key", testKey)
		check(t, "curl", "X-Leak", "")
		ev := b.next(t)
		if ev.Proto != "https" || len(ev.Brokered) != 1 || len(ev.Stripped) != 1 {
			t.Errorf("event = %+v, want one brokered and one stripped", ev)
		}
	})
	t.Run("python bearer", func(t *testing.T) {
		script := `import os, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + os.environ["ANTHROPIC_API_KEY"]})
print(urllib.request.urlopen(req, timeout=20).read().decode())
`
		out, errOut, err := b.run(t, "python3", "-c", script, https)
		if err != nil || !strings.Contains(out, "hello from") {
			t.Fatalf("python = %v, %q, %q", err, out, errOut)
		}
		check(t, "python", "Authorization", "Bearer "+testKey)
		b.next(t)
	})
	t.Run("node", func(t *testing.T) {
		// Node 20 ignores HTTPS_PROXY, so the script opens the tunnel
		// itself; it trusts the box CA through NODE_EXTRA_CA_CERTS.
		script := `const http = require("http"), tls = require("tls");
const proxy = new URL(process.env.HTTPS_PROXY), target = new URL(process.argv[1]);
const req = http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target.host});
req.on("connect", (res, sock) => {
  if (res.statusCode !== 200) { console.log("blocked", res.statusCode, res.statusMessage); process.exit(0); }
  const s = tls.connect({socket: sock, servername: target.hostname}, () => {
    s.write("GET " + target.pathname + " HTTP/1.1\r\nHost: " + target.host + "\r\nx-api-key: " + process.env.ANTHROPIC_API_KEY + "\r\nConnection: close\r\n\r\n");
  });
  let body = ""; s.on("data", d => body += d); s.on("end", () => console.log(body));
  s.on("error", e => { console.log("tls error", e.message); process.exit(1); });
});
req.on("error", e => { console.log("error", e.message); process.exit(1); });
req.end();
`
		out, errOut, err := b.run(t, "node", "-e", script, https)
		if err != nil || !strings.Contains(out, "hello from api.outside.test") {
			t.Fatalf("node = %v, %q, %q", err, out, errOut)
		}
		check(t, "node", "X-Api-Key", testKey)
		b.next(t)
	})
	t.Run("curl over socks5h", func(t *testing.T) {
		out, errOut, err := b.run(t, "curl", "-sS", "-x", "socks5h://"+b.addr, "-H", "x-api-key: "+ph, https)
		if err != nil || !strings.Contains(out, "hello from api.outside.test") {
			t.Fatalf("curl = %v, %q, %q", err, out, errOut)
		}
		check(t, "curl over SOCKS", "X-Api-Key", testKey)
		b.next(t)
	})
	t.Run("placeholder to another host is stripped", func(t *testing.T) {
		out, errOut, err := b.run(t, "curl", "-sS", "-H", "x-api-key: "+ph, "-H", "Authorization: Bearer "+ph,
			fmt.Sprintf("http://outside.test:%d/exfil/%s?k=%s", o.httpPort, ph, ph))
		if err != nil || !strings.Contains(out, "hello from") {
			t.Fatalf("curl = %v, %q, %q", err, out, errOut)
		}
		if strings.Contains(out, ph) {
			t.Errorf("the other host saw the placeholder in the path: %q", out)
		}
		seen := o.lastSeen(t)
		for k, vs := range seen {
			for _, v := range vs {
				if strings.Contains(v, ph) || strings.Contains(v, testKey) {
					t.Errorf("the other host saw %s: %s", k, v)
				}
			}
		}
		if ev := b.next(t); len(ev.Stripped) != 1 || ev.Stripped[0] != "ANTHROPIC_API_KEY" {
			t.Errorf("event = %+v, want the placeholder reported stripped", ev)
		}
	})
	t.Run("the agent's TLS trusts only the box CA for brokered hosts", func(t *testing.T) {
		// Without the bundle, curl refuses the proxy's certificate: the
		// interception is visible, never silent.
		_, errOut, err := b.run(t, "curl", "-sS", "--cacert", "/dev/null", https)
		if err == nil {
			t.Errorf("curl accepted the box's certificate without trusting the box CA: %s", errOut)
		}
		b.next(t)
	})
}

func TestBrokeringVerifiesUpstream(t *testing.T) {
	o := startOutside(t)
	o.roots = x509.NewCertPool() // the proxy trusts nothing: the real server's certificate fails
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow"},
		Secret{Name: "K", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key", Port: o.httpsPort})
	out, _, _ := b.run(t, "curl", "-sS", "-i", fmt.Sprintf("https://api.outside.test:%d/", o.httpsPort))
	if !strings.Contains(out, "502") || !strings.Contains(out, "certificate") {
		t.Errorf("curl to a brokered host with an untrusted upstream = %q, want 502 naming the certificate", out)
	}
	if ev := b.next(t); ev.Decision != Fail {
		t.Errorf("event = %+v, want error", ev)
	}
	if o.count() != 0 {
		t.Error("the request reached an upstream whose certificate failed")
	}
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

func TestCACert(t *testing.T) {
	t.Parallel()
	pol, _ := NewPolicy(protocol.NetworkSpec{})
	p, err := New(Options{Policy: pol, Guard: testGuard})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(p.CACert())
	if blk == nil {
		t.Fatal("CACert is not PEM")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || !c.IsCA {
		t.Fatalf("CACert: %v, IsCA %v", err, c != nil && c.IsCA)
	}
	q, _ := New(Options{Policy: pol, Guard: testGuard})
	if bytes.Equal(p.CACert(), q.CACert()) {
		t.Error("two proxies share a CA: each box must make its own")
	}
}

// TestWriteBundle: the bundle agents trust is the system's roots, as the
// environment names them, then the box CA, with a line break between
// them whether or not the system's file ends with one.
func TestWriteBundle(t *testing.T) {
	pol, _ := NewPolicy(protocol.NetworkSpec{})
	p, err := New(Options{Policy: pol, Guard: testGuard})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, system := range []string{"SYSTEM", "SYSTEM\n", strings.Repeat("ROOTS\n", 50000) + "LAST"} {
		src := filepath.Join(dir, "roots.pem")
		if err := os.WriteFile(src, []byte(system), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "bundle.crt")
		named := SystemBundle(func(k string) string { return map[string]string{"SSL_CERT_FILE": src}[k] })
		if named != src {
			t.Fatalf("SystemBundle with SSL_CERT_FILE=%s names %q", src, named)
		}
		if err := p.WriteBundle(out, named); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out)
		want := strings.TrimSuffix(system, "\n") + "\n# Glovebox box CA: the egress proxy brokers secrets with it\n" + string(p.CACert())
		if string(got) != want {
			t.Errorf("system roots of %d bytes: bundle of %d bytes, want %d: the roots, a line break, the CA", len(system), len(got), len(want))
		}
	}
	// No system bundle: the CA alone.
	out := filepath.Join(dir, "alone.crt")
	if err := p.WriteBundle(out, ""); err != nil {
		t.Fatal(err)
	}
	want := "# Glovebox box CA: the egress proxy brokers secrets with it\n" + string(p.CACert())
	if got, _ := os.ReadFile(out); string(got) != want {
		t.Errorf("bundle without system roots = %q, want the CA alone", got)
	}
	// A missing or empty SSL_CERT_FILE is passed over for the usual places.
	empty := filepath.Join(dir, "empty.pem")
	os.WriteFile(empty, nil, 0o644)
	if got := SystemBundle(func(string) string { return empty }); got == empty {
		t.Errorf("SystemBundle chose the empty file %s", empty)
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

// checkLeaks fails the test when a goroutine of this package outlives
// Serve.
func checkLeaks(t testing.TB) {
	t.Helper()
	testkit.NoGoroutines(t, "kit/egress.(*")
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

// TestBrokeredTunnelRechecked: a policy change applies to the next
// request inside a kept-alive brokered tunnel.
func TestBrokeredTunnelRechecked(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow"}, Secret{Name: "K", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key", Port: o.httpsPort})
	boxRoots := x509.NewCertPool()
	boxRoots.AppendCertsFromPEM(b.p.CACert())
	proxyURL, _ := url.Parse("http://" + b.addr)
	var dials atomic.Int32
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: boxRoots},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	u := fmt.Sprintf("https://api.outside.test:%d/", o.httpsPort)
	get := func() int {
		resp, err := cl.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	pol, _ := NewPolicy(protocol.NetworkSpec{Default: "allow", Deny: []string{"api.outside.test"}})
	b.p.SetPolicy(pol)
	if code := get(); code != 451 {
		t.Errorf("request after the deny: %d, want 451", code)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the client dialled the proxy %d times, want 1 (the check must be on the kept-alive tunnel)", n)
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
