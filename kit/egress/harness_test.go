// Fixtures shared by the proxy's tests: the world outside the box on
// loopback, and a box with a proxy serving its session.

package egress

import (
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
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// checkLeaks fails the test when a goroutine of this package outlives
// Serve.
func checkLeaks(t testing.TB) {
	t.Helper()
	testkit.NoGoroutines(t, "kit/egress.(*")
}
