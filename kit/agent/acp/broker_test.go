package acp_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/netguard"
)

// fakeAPI is a stand-in for a model API host (api.anthropic.com) served
// over TLS on loopback with a certificate for that name: it records the
// API key every request carries and refuses it, as the real API refuses
// a key it does not know.
type fakeAPI struct {
	srv   *httptest.Server
	roots *x509.CertPool
	mu    sync.Mutex
	keys  []string // x-api-key of every request
	paths []string
}

func newFakeAPI(t *testing.T, host string) *fakeAPI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAPI{roots: x509.NewCertPool()}
	f.roots.AddCert(cert)
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.keys = append(f.keys, r.Header.Get("X-Api-Key"))
		f.paths = append(f.paths, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	}))
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) seen() (keys, paths []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...), append([]string(nil), f.paths...)
}

// TestPresetBrokersKey: the claude-code preset's agent, installed from its
// lock, in a sandboxed session behind the egress proxy with the preset's
// policy. Its first prompt reaches the model API host (a fake
// api.anthropic.com, which the proxy's resolver and dialer seams lead to a
// TLS server on loopback) with the real key, put there by the proxy; the
// agent's processes hold only the placeholder.
func TestPresetBrokersKey(t *testing.T) {
	t.Parallel()
	p := preparePreset(t, "claude-code")
	api := newFakeAPI(t, "api.anthropic.com")
	apiAddr := api.srv.Listener.Addr().String()
	secret := "sk-ant-test-" + fmt.Sprint(time.Now().UnixNano())
	fake := netip.MustParseAddr("203.0.113.9")
	k := servePreset(t, p, 0, slog.LevelInfo, func(o *kit.Options) {
		o.Getenv = func(k string) string {
			if k == "ANTHROPIC_API_KEY" {
				return secret
			}
			return ""
		}
		o.Egress = kit.EgressOptions{
			// api.anthropic.com resolves to a documentation address the
			// guard is told to open; the dialer leads it to the fake.
			Guard: netguard.New(netguard.Options{Open: []netip.Prefix{netip.PrefixFrom(fake, 32)}}),
			Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
				if host == "api.anthropic.com" {
					return []netip.Addr{fake}, nil
				}
				return nil, fmt.Errorf("test resolver: no such host %s", host)
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr != net.JoinHostPort(fake.String(), "443") {
					return nil, fmt.Errorf("test dialer: only api.anthropic.com:443, not %s", addr)
				}
				var d net.Dialer
				return d.DialContext(ctx, network, apiAddr)
			},
			RootCAs: api.roots,
		}
	})
	c := dial(t, k.url, k.key)
	defer c.close()
	if hello := c.next(); hello["type"] != "hello" {
		t.Fatalf("first frame %v, want hello", hello)
	}
	c.prompt("p1", "Say hello.", nil)
	// The prompt ends with the API's refusal (Claude Code may retry
	// first); the key has arrived by then.
	ctx, cancel := context.WithTimeout(context.Background(), presetStart)
	defer cancel()
	for {
		keys, _ := api.seen()
		if len(keys) > 0 {
			break
		}
		select {
		case f := <-c.frames:
			if f["id"] == "p1" && (f["type"] == "complete" || f["type"] == "error") {
				t.Fatalf("the prompt ended with %v before any request reached the fake api.anthropic.com", f)
			}
		case <-ctx.Done():
			t.Fatalf("no request reached the fake api.anthropic.com within %v", presetStart)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The agent's processes: every process of the kit's session uids.
	env := sessionEnvirons(t, k.uidBase, k.uidBase+uidsPerKit)
	if len(env) == 0 {
		t.Fatal("found no process of a session uid")
	}
	placeholder := false
	for pid, e := range env {
		if bytes.Contains(e, []byte(secret)) {
			t.Errorf("the real key is in the environment of process %d of the session", pid)
		}
		placeholder = placeholder || bytes.Contains(e, []byte("ANTHROPIC_API_KEY=glovebox-placeholder-ANTHROPIC_API_KEY-"))
	}
	if !placeholder {
		t.Errorf("no session process has ANTHROPIC_API_KEY as the placeholder")
	}
	c.send(map[string]any{"type": "abort", "id": "p1"})
	fs := c.finish("p1")
	if all := fmt.Sprint(fs); strings.Contains(all, secret) {
		t.Errorf("the real key reached the client:\n%s", all)
	}
	keys, paths := api.seen()
	for i, key := range keys {
		if key != secret {
			t.Errorf("request %s reached the API with x-api-key %q, want the real key", paths[i], key)
		}
	}
	t.Logf("the fake API got %v", paths)
}

// sessionEnvirons reads the environment of every process whose uid is in
// [lo, hi): a kit's session uids.
func sessionEnvirons(t *testing.T, lo, hi int) map[int][]byte {
	t.Helper()
	out := map[int][]byte{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var uid int
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				fmt.Sscan(f[1], &uid)
			}
		}
		if uid < lo || uid >= hi {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil {
			out[pid] = env
		}
	}
	return out
}
