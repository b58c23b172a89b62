package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

func urlRef(u string, headers map[string]string) protocol.FileRef {
	return protocol.FileRef{Kind: protocol.KindURL, Name: "in.bin", URL: u, Headers: headers}
}

// loopbackURL is a url adapter allowed to reach the tests' loopback
// servers, which the default refuses.
func loopbackURL(t *testing.T, opts URLOptions) *URL {
	opts.AllowLoopback = true
	opts.Logger = testLogger(t)
	return NewURL(opts)
}

func TestURLOpen(t *testing.T) {
	t.Parallel()
	payload := randomBytes(t, 10_000)
	var gotHeader http.Header
	var gotHost string
	mux := http.NewServeMux()
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		gotHeader, gotHost = r.Header.Clone(), r.Host
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		w.Write(payload)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(payload); i += 1000 {
			w.Write(payload[i : i+1000])
			w.(http.Flusher).Flush() // no Content-Length
		}
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/teapot", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			w.Write(payload)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/to-file-scheme", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		name     string
		opts     URLOptions
		ref      protocol.FileRef
		max      int64
		openErr  string // error from Open
		readErr  error  // error while reading the body
		isErr    error
		wantBody []byte
	}{
		{name: "ok", ref: urlRef(srv.URL+"/file", nil), wantBody: payload},
		{name: "exact max", ref: urlRef(srv.URL+"/file", nil), max: int64(len(payload)), wantBody: payload},
		{name: "content-length over max", ref: urlRef(srv.URL+"/file", nil), max: 9_999, openErr: "Content-Length 10000 is over 9999 bytes", isErr: ErrTooLarge},
		{name: "chunked exact max", ref: urlRef(srv.URL+"/chunked", nil), max: int64(len(payload)), wantBody: payload},
		{name: "chunked over max", ref: urlRef(srv.URL+"/chunked", nil), max: 4_500, readErr: ErrTooLarge},
		{name: "404", ref: urlRef(srv.URL+"/missing", nil), openErr: "fetch " + srv.URL + "/missing: 404 Not Found"},
		{name: "418", ref: urlRef(srv.URL+"/teapot", nil), openErr: "fetch " + srv.URL + "/teapot: 418 I'm a teapot"},
		{name: "five redirects", ref: urlRef(srv.URL+"/redirect/5", nil), wantBody: payload},
		{name: "six redirects", ref: urlRef(srv.URL+"/redirect/6", nil), openErr: "stopped after 5 redirects"},
		{name: "redirects disabled", opts: URLOptions{MaxRedirects: -1}, ref: urlRef(srv.URL+"/redirect/1", nil), openErr: "stopped after 0 redirects"},
		{name: "redirect to metadata refused", ref: urlRef(srv.URL+"/to-metadata", nil), openErr: "refusing to connect to 169.254.169.254 (cloud metadata, never permitted", isErr: ErrForbiddenAddress},
		{name: "redirect to file scheme", ref: urlRef(srv.URL+"/to-file-scheme", nil), openErr: "scheme must be http or https"},
		{name: "ftp", ref: urlRef("ftp://example.com/x", nil), openErr: "scheme must be http or https"},
		{name: "wrong kind", ref: protocol.FileRef{Kind: "inline", Name: "x"}, openErr: "cannot read a inline ref"},
		{name: "credentials redacted", ref: urlRef("http://user:secret@"+srv.Listener.Addr().String()+"/missing", nil), openErr: "fetch http://user:xxxxx@"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := loopbackURL(t, tt.opts)
			rc, err := a.Open(t.Context(), tt.ref, tt.max)
			if tt.openErr != "" {
				if err == nil {
					rc.Close()
					t.Fatalf("Open succeeded, want error %q", tt.openErr)
				}
				if !strings.Contains(err.Error(), tt.openErr) {
					t.Errorf("Open error = %q, want it to contain %q", err, tt.openErr)
				}
				if tt.isErr != nil && !errors.Is(err, tt.isErr) {
					t.Errorf("Open error = %v, want %v", err, tt.isErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("Open error %q shows the URL's password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if tt.readErr != nil {
				if !errors.Is(err, tt.readErr) {
					t.Fatalf("read error = %v, want %v", err, tt.readErr)
				}
				if int64(len(got)) > tt.max {
					t.Errorf("read %d bytes before failing, more than max %d", len(got), tt.max)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.wantBody) {
				t.Errorf("read %d bytes, %v; want %d bytes", len(got), err, len(tt.wantBody))
			}
		})
	}

	t.Run("headers", func(t *testing.T) {
		a := loopbackURL(t, URLOptions{})
		rc, err := a.Open(t.Context(), urlRef(srv.URL+"/file", map[string]string{
			"Authorization":     "Bearer input-token",
			"x-custom":          "yes",
			"Host":              "evil.example",
			"Connection":        "close, X-Drop-Me",
			"X-Drop-Me":         "1",
			"Keep-Alive":        "timeout=5",
			"Upgrade":           "websocket",
			"Transfer-Encoding": "chunked",
			"Te":                "trailers",
			"X-Split":           "a\r\nX-Injected: 1",
		}), 0)
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
		if got := gotHeader.Get("Authorization"); got != "Bearer input-token" {
			t.Errorf("Authorization = %q, want it forwarded", got)
		}
		if got := gotHeader.Get("X-Custom"); got != "yes" {
			t.Errorf("X-Custom = %q, want it forwarded", got)
		}
		if gotHost != srv.Listener.Addr().String() {
			t.Errorf("Host = %q, want the URL's host %q", gotHost, srv.Listener.Addr())
		}
		for _, h := range []string{"X-Drop-Me", "Keep-Alive", "Upgrade", "Te", "X-Split", "X-Injected"} {
			if v := gotHeader.Get(h); v != "" {
				t.Errorf("header %s = %q reached the server, want it dropped", h, v)
			}
		}
	})
}

// The default adapter refuses loopback, and says how to allow it.
func TestURLRefusesLoopbackByDefault(t *testing.T) {
	t.Parallel()
	var hit atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Store(true) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, u := range []string{
		srv.URL,
		"http://localhost:" + port + "/", // resolved by DNS, checked after resolution
		"http://[::ffff:127.0.0.1]:" + port + "/",
	} {
		rc, err := NewURL(URLOptions{}).Open(t.Context(), urlRef(u, nil), 0)
		if err == nil {
			rc.Close()
			t.Fatalf("Open(%s) with default options succeeded", u)
		}
		if !errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), "(loopback, refused unless the box's operator sets [inputs] allow_loopback_urls = true in glovebox.toml") {
			t.Errorf("Open(%s) error = %q, want a loopback refusal", u, err)
		}
	}
	if hit.Load() {
		t.Error("the server was reached")
	}
}

func TestURLTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/slow-body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)

	a := loopbackURL(t, URLOptions{Timeout: 100 * time.Millisecond})
	_, err := a.Open(t.Context(), urlRef(srv.URL+"/hang", nil), 0)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("Open of a hanging server = %v, want a timeout", err)
	}
	rc, err := a.Open(t.Context(), urlRef(srv.URL+"/slow-body", nil), 0)
	if err != nil {
		t.Fatalf("Open slow body: %v", err)
	}
	defer rc.Close()
	_, err = io.ReadAll(rc)
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("reading a stalled body = %v, want a timeout", err)
	}
}

func TestURLContextCancel(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	go cancel()
	_, err := loopbackURL(t, URLOptions{}).Open(ctx, urlRef(srv.URL, nil), 0)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestURLReadOnly(t *testing.T) {
	t.Parallel()
	a := NewURL(URLOptions{})
	if !a.ReadOnly() {
		t.Error("ReadOnly() = false")
	}
	_, err := a.Put(t.Context(), Meta{Name: "out.txt", Size: 1}, strings.NewReader("x"))
	if !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put = %v, want ErrReadOnly", err)
	}
}

func TestURLAddressGuard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr         string
		def          string // reason with default options ("" = allowed)
		allowPrivate bool   // allowed once AllowPrivate is set
	}{
		{"8.8.8.8", "", true},
		{"2001:4860:4860::8888", "", true},
		{"127.0.0.1", "loopback", false},
		{"127.255.0.9", "loopback", false},
		{"::1", "loopback", false},
		{"::ffff:127.0.0.1", "loopback", false},
		{"10.1.2.3", "private", true},
		{"172.16.0.1", "private", true},
		{"172.31.255.255", "private", true},
		{"172.32.0.1", "", true},
		{"192.168.1.1", "private", true},
		{"::ffff:192.168.1.1", "private", true},
		{"fc00::1", "private", true},
		{"fd12:3456::1", "private", true},
		{"100.64.0.1", "carrier-grade NAT", true},
		{"100.127.255.254", "carrier-grade NAT", true},
		{"100.128.0.1", "", true},
		{"169.254.169.254", "cloud metadata", false},
		{"fd00:ec2::254", "cloud metadata", false},
		{"169.254.1.1", "link-local", false},
		{"fe80::1", "link-local", false},
		{"0.0.0.0", "unspecified", false},
		{"0.1.2.3", "unspecified", false},
		{"::", "unspecified", false},
		{"224.0.0.1", "multicast", false},
		{"239.255.255.250", "multicast", false},
		{"ff02::1", "multicast", false},
		{"255.255.255.255", "broadcast", false},
		{"240.0.0.1", "reserved", false},
		{"64:ff9b::a9fe:a9fe", "cloud metadata", false}, // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", "", true},                  // NAT64 of 8.8.8.8
		{"::7f00:1", "loopback", false},                 // IPv4-compatible 127.0.0.1
		// The table the egress proxy uses: what the adapter let through
		// before it shared it.
		{"168.63.129.16", "cloud metadata", false},
		{"100.100.100.200", "cloud metadata", false},
		{"2002:a9fe:a9fe::", "cloud metadata", false}, // 6to4 of 169.254.169.254
		{"64:ff9b:1::a9fe:a9fe", "local-use NAT64", false},
		{"198.18.0.1", "benchmarking", false},
		{"203.0.113.9", "documentation", false},
		{"192.0.0.170", "IETF protocol assignments", false},
	}
	def := NewURL(URLOptions{})
	priv := NewURL(URLOptions{AllowPrivate: true})
	for _, tt := range tests {
		addr := netip.MustParseAddr(tt.addr)
		got := def.refuse(addr, 443)
		if tt.def == "" && got != "" || tt.def != "" && !strings.Contains(got, tt.def) {
			t.Errorf("refuse(%s) = %q, want %q", tt.addr, got, tt.def)
		}
		if allowed := priv.refuse(addr, 443) == ""; allowed != tt.allowPrivate {
			t.Errorf("with AllowPrivate: refuse(%s) allowed = %v, want %v", tt.addr, allowed, tt.allowPrivate)
		}
		if err := def.control("tcp", netip.AddrPortFrom(addr, 443).String(), nil); (err == nil) != (tt.def == "") {
			t.Errorf("control(%s) = %v", tt.addr, err)
		}
	}
}

// Whatever the bytes, an address the default guard lets through is a
// public unicast one.
func FuzzAddressGuard(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1", "169.254.169.254", "64:ff9b::a9fe:a9fe", "::ffff:10.0.0.1", "8.8.8.8", "fd00::1"} {
		b := netip.MustParseAddr(s).As16()
		f.Add(b[:])
	}
	def := NewURL(URLOptions{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 16 && len(b) != 4 {
			return
		}
		addr, _ := netip.AddrFromSlice(b)
		if def.refuse(addr, 443) != "" {
			return
		}
		u := addr.Unmap()
		if u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() || u.IsMulticast() || u.IsUnspecified() ||
			u.IsInterfaceLocalMulticast() || u.IsLinkLocalMulticast() || netip.MustParsePrefix("100.64.0.0/10").Contains(u) {
			t.Fatalf("refuse(%s) allowed a non-public address", addr)
		}
		if v4, _, ok := netguard.Embedded(u); ok {
			if v4.IsLoopback() || v4.IsPrivate() || v4.IsLinkLocalUnicast() || v4.IsUnspecified() {
				t.Fatalf("refuse(%s) allowed an embedded non-public %s", addr, v4)
			}
		}
	})
}

// Caller-supplied headers never smuggle hop-by-hop fields or line breaks.
func FuzzForwardHeaders(f *testing.F) {
	f.Add("Connection", "close, X-A", "X-A", "1")
	f.Add("x-custom", "ok", "Host", "evil")
	f.Add("X-B", "a\r\nX-C: 1", "transfer-encoding", "chunked")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		out := forwardHeaders(map[string]string{k1: v1, k2: v2})
		for k, vs := range out {
			if hopByHop[k] {
				t.Fatalf("forwarded hop-by-hop header %q", k)
			}
			if !validHeader(k, "") {
				t.Fatalf("forwarded bad header name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("forwarded header %q with a line break: %q", k, v)
				}
			}
		}
	})
}

// TestS3EndpointGuard: the s3 adapter's own client never reaches a
// special-purpose address, whatever the endpoint names; this machine and
// the private network stay open to the operator's endpoint. The endpoint
// is 0.0.0.0 (unspecified), which a dialer without the guard takes to
// this machine's loopback server: the test sees that, and never sends
// anything elsewhere.
func TestS3EndpointGuard(t *testing.T) {
	t.Parallel()
	var hit atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Store(true) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, ep := range []string{"http://0.0.0.0:" + port, "http://127.0.0.1:" + port} {
		a, err := NewS3(S3Options{Endpoint: ep, PathStyle: true, Bucket: "bucket", AccessKeyID: "k", SecretAccessKey: "s", Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		hit.Store(false)
		rc, err := a.Open(t.Context(), protocol.FileRef{Kind: protocol.KindS3, Name: "x", Bucket: "bucket", Key: "k"}, 0)
		if rc != nil {
			rc.Close()
		}
		var ce *netguard.ClosedError
		switch {
		case strings.Contains(ep, "0.0.0.0") && (!errors.As(err, &ce) || hit.Load()):
			t.Errorf("s3 Open against %s = %v, reached %v; want a refusal before any connection", ep, err, hit.Load())
		case strings.Contains(ep, "127.0.0.1") && !hit.Load():
			t.Errorf("s3 Open against %s = %v; want the operator's loopback endpoint reached", ep, err)
		}
	}
}
