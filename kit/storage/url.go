package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Defaults of the url adapter.
const (
	DefaultURLTimeout   = 60 * time.Second
	DefaultMaxRedirects = 5
)

// ErrForbiddenAddress is wrapped by the error a url fetch returns when the
// host resolves to an address the adapter refuses to connect to.
var ErrForbiddenAddress = errors.New("storage: address not allowed")

// URLOptions configure the url adapter. The zero value is the safe default.
type URLOptions struct {
	// Timeout bounds a whole fetch: connecting, redirects and reading the
	// body. Default DefaultURLTimeout.
	Timeout time.Duration
	// MaxRedirects is how many redirects a fetch follows. Default
	// DefaultMaxRedirects; a negative value follows none.
	MaxRedirects int
	// AllowPrivate permits private addresses: RFC 1918 (10/8, 172.16/12,
	// 192.168/16), IPv6 unique local (fc00::/7) and CGNAT (100.64/10):
	// the netguard.Private class.
	AllowPrivate bool
	// AllowLoopback permits this machine: loopback addresses (127/8,
	// ::1), the host's own addresses and the kit's own ports on them (the
	// netguard.Host and netguard.Kit classes; `gbx dev` serves local
	// files to the kit from its own process).
	AllowLoopback bool
	// Guard decides the addresses. Nil means netguard.Default(), the
	// table the egress proxy uses too.
	Guard *netguard.Guard
	// Logger receives one debug line per fetch. Default: discard.
	Logger *slog.Logger
}

// URL reads url FileRefs by fetching them over HTTP(S). It is read-only:
// Put always fails with ErrReadOnly, and protocol.ValidateOutputs refuses
// an outputs policy that targets it.
//
// Every connection is checked at dial time, on the resolved IP, against
// the kit's one address table (package netguard), so neither a redirect
// nor DNS rebinding reaches an address the options refuse. Link-local,
// cloud metadata in every spelling, unspecified, multicast, broadcast,
// documentation, benchmarking and reserved addresses are always refused;
// private and loopback addresses (and the host's own) unless URLOptions
// allow them. Proxy settings from the environment are ignored, since a
// proxy would hide the real address.
type URL struct {
	client *http.Client
	opts   URLOptions
	log    *slog.Logger
}

var (
	_ Adapter  = (*URL)(nil)
	_ ReadOnly = (*URL)(nil)
)

// NewURL returns a url adapter with the given options.
func NewURL(opts URLOptions) *URL {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultURLTimeout
	}
	if opts.MaxRedirects == 0 {
		opts.MaxRedirects = DefaultMaxRedirects
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Guard == nil {
		opts.Guard = netguard.Default()
	}
	a := &URL{opts: opts, log: log}
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: a.control}
	a.client = &http.Client{
		Timeout: opts.Timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:    10 * time.Second,
			ForceAttemptHTTP2:      true,
			DisableKeepAlives:      true, // inputs are occasional; leave no idle connections behind
			MaxResponseHeaderBytes: 1 << 20,
		},
		CheckRedirect: a.checkRedirect,
	}
	return a
}

// ReadOnly reports true: url refs can be read, never written.
func (a *URL) ReadOnly() bool { return true }

// Put fails with ErrReadOnly.
func (a *URL) Put(ctx context.Context, meta Meta, r io.Reader) (protocol.FileRef, error) {
	return protocol.FileRef{}, fmt.Errorf("url adapter cannot store %s: %w", meta.Name, ErrReadOnly)
}

// Open fetches the ref's URL with a GET carrying the ref's headers (minus
// Host and hop-by-hop headers). A non-2xx answer is the error
// "fetch <url>: <status>". A body longer than max (max > 0) fails with
// ErrTooLarge: up front when Content-Length says so, otherwise when the
// reader passes max. The timeout covers reading the body too.
func (a *URL) Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error) {
	if ref.Kind != protocol.KindURL {
		return nil, fmt.Errorf("url adapter cannot read a %s ref (file %q)", ref.Kind, ref.Name)
	}
	u, err := url.Parse(ref.URL)
	if err != nil {
		return nil, fmt.Errorf("url file %q: bad url: %w", ref.Name, err)
	}
	shown := u.Redacted()
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("fetch %s: scheme must be http or https", shown)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", shown, err)
	}
	for k, v := range forwardHeaders(ref.Headers) {
		req.Header[k] = v
	}
	resp, err := a.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the url is in our own prefix
		}
		return nil, fmt.Errorf("fetch %s: %w", shown, err)
	}
	a.log.Debug("fetched url input", "url", shown, "status", resp.StatusCode, "length", resp.ContentLength)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body.Close()
		return nil, fmt.Errorf("fetch %s: %s", shown, resp.Status)
	}
	if max > 0 && resp.ContentLength > max {
		resp.Body.Close()
		return nil, fmt.Errorf("fetch %s: Content-Length %d is over %d bytes: %w", shown, resp.ContentLength, max, ErrTooLarge)
	}
	if max <= 0 {
		return resp.Body, nil
	}
	return &cappedBody{rc: resp.Body, left: max, url: shown, max: max}, nil
}

// cappedBody fails with ErrTooLarge once more than max bytes were read.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
	max  int64
	url  string
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("fetch %s: body is over %d bytes: %w", c.url, c.max, ErrTooLarge)
	}
	// Read one byte past the cap so an exactly-max body still ends in EOF.
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n + int(c.left), fmt.Errorf("fetch %s: body is over %d bytes: %w", c.url, c.max, ErrTooLarge)
	}
	return n, err
}

func (c *cappedBody) Close() error { return c.rc.Close() }

// hopByHop are the headers a proxy must not forward (RFC 9110 7.6.1), plus
// those the client computes itself.
var hopByHop = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Host":                true,
	"Content-Length":      true,
}

// forwardHeaders returns the caller's headers minus hop-by-hop ones, Host,
// and any named by a Connection header.
func forwardHeaders(in map[string]string) http.Header {
	drop := map[string]bool{}
	for k, v := range in {
		if http.CanonicalHeaderKey(k) == "Connection" {
			for _, f := range strings.Split(v, ",") {
				drop[http.CanonicalHeaderKey(strings.TrimSpace(f))] = true
			}
		}
	}
	out := http.Header{}
	for k, v := range in {
		ck := http.CanonicalHeaderKey(k)
		if hopByHop[ck] || drop[ck] || !validHeader(ck, v) {
			continue
		}
		out[ck] = append(out[ck], v)
	}
	return out
}

// validHeader refuses names and values net/http would reject or that could
// split a request.
func validHeader(k, v string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	return !strings.ContainsAny(v, "\r\n\x00")
}

func (a *URL) checkRedirect(req *http.Request, via []*http.Request) error {
	if a.opts.MaxRedirects < 0 || len(via) > a.opts.MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", len(via)-1)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirect to %s: scheme must be http or https", req.URL.Redacted())
	}
	return nil // the address is checked when the connection is dialled
}

// control runs on every socket before it connects, with the resolved
// address, so the check cannot be bypassed by DNS answers that change.
func (a *URL) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, ErrForbiddenAddress)
	}
	if why := a.refuse(ap.Addr(), int(ap.Port())); why != "" {
		return fmt.Errorf("refusing to connect to %s (%s): %w", ap.Addr(), why, ErrForbiddenAddress)
	}
	return nil
}

// Hints of the url adapter's refusals.
const (
	loopbackHint  = "refused unless the box's operator sets [inputs] allow_loopback_urls = true in glovebox.toml (URLOptions.AllowLoopback)"
	privateHint   = "refused unless the box's operator sets [inputs] allow_private_urls = true in glovebox.toml (URLOptions.AllowPrivate)"
	forbiddenHint = "never permitted"
)

// open maps the operator switches onto the table's classes.
func (a *URL) open(c netguard.Closure) bool {
	switch c.Class {
	case netguard.Host, netguard.Kit:
		return a.opts.AllowLoopback
	case netguard.Private:
		return a.opts.AllowPrivate
	}
	return false
}

// refuse returns why addr:port may not be dialled, or "" when it may.
func (a *URL) refuse(addr netip.Addr, port int) string {
	c, closed := a.opts.Guard.Check(addr, port, a.open)
	if !closed {
		return ""
	}
	what := c.What
	if c.Via != "" {
		what += ", spelled as " + c.Via
	}
	switch c.Class {
	case netguard.Host, netguard.Kit:
		return what + ", " + loopbackHint
	case netguard.Private:
		return what + ", " + privateHint
	}
	return what + ", " + forbiddenHint
}
