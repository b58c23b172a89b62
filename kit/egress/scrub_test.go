package egress

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// chunkReader returns data in the chunk sizes given, cycling.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = max(c.sizes[c.i%len(c.sizes)], 1)
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// checkScrubbed fails unless out is in with every needle masked: the same
// length, no needle left, and changed only to asterisks.
func checkScrubbed(t *testing.T, in, out []byte, ns [][]byte) {
	t.Helper()
	if len(out) != len(in) {
		t.Fatalf("scrubbed %d bytes into %d", len(in), len(out))
	}
	for i := range in {
		if in[i] != out[i] && out[i] != '*' {
			t.Fatalf("byte %d changed from %q to %q", i, in[i], out[i])
		}
	}
	for _, n := range ns {
		if bytes.Contains(out, n) {
			t.Fatalf("%q is still in %q", n, out)
		}
	}
}

func TestNeedles(t *testing.T) {
	t.Parallel()
	v := "sk-ant/secret+value=42"
	ns := needles(v)
	for _, form := range []string{
		v,
		url.QueryEscape(v),
		url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte("user:" + v)),
		base64.StdEncoding.EncodeToString([]byte(":" + v)),
		base64.StdEncoding.EncodeToString([]byte("ab:" + v + "tail")),
		base64.URLEncoding.EncodeToString([]byte("x" + v)),
		base64.RawStdEncoding.EncodeToString([]byte(v)),
	} {
		found := false
		for _, n := range ns {
			found = found || strings.Contains(form, string(n))
		}
		if !found {
			t.Errorf("no needle of %q is in its form %q", v, form)
		}
	}
}

func TestScrubberSplits(t *testing.T) {
	t.Parallel()
	secret := "sk-real-secret-value-0123456789"
	ns := needles(secret)
	body := []byte(`{"headers":{"X-Api-Key":"` + secret + `","Authorization":"Basic ` +
		base64.StdEncoding.EncodeToString([]byte("user:"+secret)) + `"},"url":"/?k=` + url.QueryEscape(secret) + `","twice":"` + secret + secret + `","partial":"sk-real-secret"}`)
	for _, sizes := range [][]int{{1}, {2}, {3, 7}, {30}, {31}, {32}, {5, 1, 17}, {1 << 20}} {
		hits := 0
		out, err := io.ReadAll(newScrubber(io.NopCloser(&chunkReader{data: bytes.Clone(body), sizes: sizes}), ns, &hits))
		if err != nil {
			t.Fatal(err)
		}
		checkScrubbed(t, body, out, ns)
		if hits < 4 || !bytes.Contains(out, []byte(`"partial":"sk-real-secret"`)) {
			t.Errorf("sizes %v: %d hits, out %s", sizes, hits, out)
		}
	}
}

func FuzzScrubber(f *testing.F) {
	f.Add("sk-real-secret", []byte("a sk-real-secret b c2stcmVhbC1zZWNyZXQ= sk-real-sk-real-secret"), []byte{1, 2, 3})
	f.Add("abcdef", []byte("abcabcdefabcde"), []byte{4})
	f.Fuzz(func(t *testing.T, secret string, body []byte, sizes []byte) {
		if strings.Contains(secret, "*") || len(secret) > 200 {
			return
		}
		ns := needles(secret)
		sz := make([]int, len(sizes))
		for i, s := range sizes {
			sz[i] = int(s)
		}
		hits := 0
		out, err := io.ReadAll(newScrubber(io.NopCloser(&chunkReader{data: bytes.Clone(body), sizes: sz}), ns, &hits))
		if err != nil {
			t.Fatal(err)
		}
		checkScrubbed(t, body, out, ns)
	})
}

// echoUpstream is a brokered host that sends back what it received: the
// request's headers, raw, base64 and URL-escaped, a few bytes per chunk
// (each flushed: a chunk and a TLS record of its own), so that the secret
// is split across chunk boundaries. With gzip set it compresses the body
// whatever the request asked for.
func echoUpstream(t *testing.T, o *outside, gz bool, seenAE *string) int {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seenAE = r.Header.Get("Accept-Encoding")
		var b bytes.Buffer
		r.Header.Write(&b)
		k := r.Header.Get("X-Api-Key")
		fmt.Fprintf(&b, "basic: %s\nescaped: %s\n", base64.StdEncoding.EncodeToString([]byte("user:"+k)), url.QueryEscape(k))
		var out io.Writer = w
		var zw *gzip.Writer
		if gz {
			w.Header().Set("Content-Encoding", "gzip")
			zw = gzip.NewWriter(w)
			out = zw
		}
		w.Header().Set("X-Echo", k)
		for p := b.Bytes(); len(p) > 0; {
			n := min(5, len(p))
			out.Write(p[:n])
			if zw != nil {
				zw.Flush()
			}
			w.(http.Flusher).Flush()
			p = p[n:]
		}
		if zw != nil {
			zw.Close()
		}
	})
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = o.tlsConfig(t)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// agentClient is an agent's HTTP client through the box, trusting the
// box CA and, for plain tunnels, the outside servers' CA.
func (b *box) agentClient(o *outside) *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(b.p.CACert())
	roots.AppendCertsFromPEM(o.rootsPEM)
	proxyURL, _ := url.Parse("http://" + b.addr)
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true,
	}}
}

// TestBrokeredEchoScrubbed: an upstream that echoes the request's headers
// in its body never hands the agent the real value, in any of the forms
// it sends it back in, whatever chunks it is split across, compressed or
// not.
func TestBrokeredEchoScrubbed(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprint("gzip=", gz), func(t *testing.T) {
			o := startOutside(t)
			var ae string
			port := echoUpstream(t, o, gz, &ae)
			b := startBox(t, o, protocol.NetworkSpec{Default: "allow"},
				Secret{Name: "K", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key", Port: port})
			ph := b.p.Placeholders()["K"]
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://api.outside.test:%d/echo", port), nil)
			req.Header.Set("X-Api-Key", ph)
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := b.agentClient(o).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			body := raw
			if resp.Header.Get("Content-Encoding") == "gzip" {
				t.Fatalf("the agent got a gzip body: the proxy must pass on what it scrubbed")
			}
			if !bytes.Contains(body, []byte("X-Api-Key: ****")) || !bytes.Contains(body, []byte("basic: ")) {
				t.Errorf("the echo did not come back scrubbed: %s", body)
			}
			for _, form := range []string{testKey, base64.StdEncoding.EncodeToString([]byte("user:" + testKey)), url.QueryEscape(testKey), testKey[:20]} {
				if bytes.Contains(body, []byte(form)) {
					t.Errorf("the agent got %q back in the body:\n%s", form, body)
				}
			}
			if got := resp.Header.Get("X-Echo"); got != ph {
				t.Errorf("X-Echo header = %q, want the placeholder", got)
			}
			if ae != "identity" {
				t.Errorf("the brokered host was asked for Accept-Encoding %q, want identity", ae)
			}
			ev := b.next(t)
			if ev.Scrubbed < 3 || len(ev.Brokered) != 1 {
				t.Errorf("event = %+v, want the secret brokered and scrubbed at least thrice", ev)
			}
		})
	}
}

// TestBrokeredPortOnly: the secret goes to its declared port only; a
// connection to another port of the same host is a plain tunnel, and the
// host gets the placeholder there.
func TestBrokeredPortOnly(t *testing.T) {
	o := startOutside(t)
	var ae string
	port := echoUpstream(t, o, false, &ae)
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow"},
		Secret{Name: "K", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key"}) // 443
	ph := b.p.Placeholders()["K"]
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://api.outside.test:%d/echo", port), nil)
	req.Header.Set("X-Api-Key", ph)
	resp, err := b.agentClient(o).Do(req)
	if err != nil {
		t.Fatalf("the tunnel to another port: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("X-Api-Key: "+ph)) || bytes.Contains(body, []byte(testKey)) {
		t.Errorf("the host on port %d saw:\n%s\nwant the placeholder, never the secret", port, body)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "outside test CA" {
		t.Errorf("the agent's TLS on another port ended at the proxy, want the real host")
	}
	if ev := b.next(t); ev.Proto != "connect" || len(ev.Brokered) != 0 {
		t.Errorf("event = %+v, want a plain connect tunnel", ev)
	}
}

// BenchmarkScrubber is the body scrubber's throughput on a body without
// the secret, in 32 KiB reads.
//
//	go test -run '^$' -bench Scrubber ./kit/egress
func BenchmarkScrubber(b *testing.B) {
	body := bytes.Repeat([]byte(`{"type":"content_block_delta","delta":{"text":"some streamed words "}}`+"\n"), 64<<10/72)
	ns := needles(testKey)
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		hits := 0
		s := newScrubber(io.NopCloser(bytes.NewReader(body)), ns, &hits)
		for {
			if _, err := s.Read(buf); err != nil {
				break
			}
		}
	}
}
