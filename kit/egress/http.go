package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/netguard"
)

// serveHTTP serves forward-proxy requests on a kept-alive client
// connection until it closes, or hands it to a tunnel on CONNECT.
func (h *handler) serveHTTP() {
	var up *upstream
	var upBR *bufio.Reader
	defer func() {
		if up != nil {
			up.Close()
		}
	}()
	for {
		h.c.SetReadDeadline(time.Now().Add(idleTimeout))
		h.lim.head()
		req, err := http.ReadRequest(h.br)
		h.lim.unlimit()
		if errors.Is(err, errHeadTooLarge) {
			writeSimple(h.c, http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large", "glovebox egress proxy: the request head is larger than 1MB\n")
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !isClosed(err) {
				writeSimple(h.c, http.StatusBadRequest, "Bad Request", "glovebox egress proxy: cannot read the request: "+err.Error()+"\n")
			}
			return
		}
		h.c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			h.serveConnect(req)
			return
		}
		if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
			writeSimple(h.c, http.StatusBadRequest, "Bad Request",
				"glovebox egress proxy: send absolute http:// URLs (set HTTP_PROXY) or CONNECT for https (set HTTPS_PROXY); got "+strconv.Quote(req.RequestURI)+"\n")
			return
		}
		keep := h.forward(req, &up, &upBR)
		if !keep {
			return
		}
	}
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF)
}

// forward sends one plain-HTTP request upstream, reusing *up when it goes
// to the same host and port, and reports whether the client connection
// may carry another request.
func (h *handler) forward(req *http.Request, up **upstream, upBR **bufio.Reader) bool {
	host := normHost(req.URL.Hostname())
	port, ok := h.requestPort(req)
	if !ok {
		return false
	}
	var same *upstream
	if u := *up; u != nil && u.host == host && u.port == port {
		same = u
	}
	d := h.decideRequest(host, port, req, same)
	ev := event("http", host, port, d)
	if !d.Allowed() {
		writeBlock(h.c, host, port, d)
		h.emit(ev)
		return false
	}
	if same == nil {
		if u := *up; u != nil {
			u.Close()
			*up = nil
		}
		u, err := h.connect(host, port, d)
		if err != nil {
			ev.Decision, ev.Reason = Fail, err.Error()
			writeSimple(h.c, http.StatusBadGateway, "Bad Gateway", "glovebox egress proxy: "+err.Error()+"\n")
			h.emit(ev)
			return false
		}
		*up, *upBR = u, bufio.NewReader(u)
	}
	u := *up
	out0, in0 := u.out.Load(), u.in.Load()
	ev.Stripped = h.stripRequest(req, host)
	clientClose := req.Close
	req.Close = false
	resp, err := roundTrip(u, *upBR, req)
	keep := !clientClose
	if err != nil {
		u.Close()
		*up = nil
		ev.Decision, ev.Reason = Fail, err.Error()
		writeSimple(h.c, http.StatusBadGateway, "Bad Gateway", "glovebox egress proxy: "+hostPort(host, port)+": "+err.Error()+"\n")
		ev.BytesOut, ev.BytesIn = u.out.Load()-out0, u.in.Load()-in0
		h.emit(ev)
		return false
	}
	upClose := resp.Close
	removeHopHeaders(resp.Header)
	resp.Close = clientClose
	err = writeResponse(h.c, resp)
	resp.Body.Close()
	if upClose || err != nil {
		u.Close()
		*up = nil
	}
	if resp.Close || err != nil {
		keep = false
	}
	ev.BytesOut, ev.BytesIn = u.out.Load()-out0, u.in.Load()-in0
	h.emit(ev)
	return keep
}

// requestPort is the port of a plain-HTTP request's URL, 80 when it names
// none; a bad one is answered with 400 and reports false.
func (h *handler) requestPort(req *http.Request) (int, bool) {
	ps := req.URL.Port()
	if ps == "" {
		return 80, true
	}
	n, err := strconv.Atoi(ps)
	if err != nil || n < 1 || n > 65535 {
		writeSimple(h.c, http.StatusBadRequest, "Bad Request", "glovebox egress proxy: bad port "+strconv.Quote(ps)+"\n")
		return 0, false
	}
	return n, true
}

// decideRequest decides one request with the session's rules as they are
// now: on an upstream already open to the host (same, nil for none),
// against the address it is connected to (no new lookup); then the ask
// step; then, for a host whose rules inspect requests, the request's
// method and path.
func (h *handler) decideRequest(host string, port int, req *http.Request, same *upstream) Decision {
	rs := h.rules()
	var d Decision
	if same != nil {
		_, isAddr := netguard.ParseHost(host)
		d = rs.decideAddrs(h.p.guard, host, !isAddr, port, []netip.Addr{same.addr})
	} else {
		d = rs.decide(h.ctx, h.p.guard, h.resolve, host, port)
	}
	d = h.ask(host, port, d)
	if d.Allowed() && d.inspect {
		if rd := rs.request(host, port, req.Method, requestPath(req)); !rd.Allowed() {
			rd.Addrs = d.Addrs
			d = rd
		}
	}
	return d
}

// stripRequest removes from a plain-HTTP request every secret's
// placeholder (no secret is brokered over plain HTTP) and returns their
// names; it readies req to be sent as is to host.
func (h *handler) stripRequest(req *http.Request, host string) []string {
	stripped := h.p.strip(req.Header)
	stripped = appendNew(stripped, h.p.stripURL(req.URL)...)
	if len(stripped) > 0 {
		h.p.log.Warn("egress: placeholders stripped", "session", h.s.ID, "host", host, "secrets", stripped)
	}
	if req.Header.Get("Expect") == "100-continue" {
		io.WriteString(h.c, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	removeHopHeaders(req.Header)
	req.Header.Del("Expect")
	req.RequestURI = ""
	req.Host = req.URL.Host // the host the policy decided, whatever the Host header said
	return stripped
}

// requestPath is the path of req as it goes upstream, escaped as sent:
// what request rules match (decoded once, by CleanRequestPath). An
// opaque target has none, so it matches no path rule.
func requestPath(req *http.Request) string {
	if req.URL.Opaque != "" {
		return "\x00opaque"
	}
	return req.URL.EscapedPath()
}

// roundTrip writes req on an upstream connection and reads its answer,
// skipping interim 1xx answers.
func roundTrip(w io.Writer, br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if err := req.Write(w); err != nil {
		return nil, fmt.Errorf("send the request: %w", err)
	}
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, fmt.Errorf("read the answer: %w", err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			resp.Body.Close()
			continue
		}
		return resp, nil
	}
}

// writeResponse writes resp to the client through a buffer, so that its
// head and a small body leave in one write, flushing before every read
// of the body so that a streamed answer (server-sent events) is never
// held back.
func writeResponse(w io.Writer, resp *http.Response) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	resp.Body = flushingReader{resp.Body, bw}
	// Only Write: bufio.Writer's ReadFrom would read into the buffer that
	// the reader's flush empties.
	if err := resp.Write(struct{ io.Writer }{bw}); err != nil {
		return err
	}
	return bw.Flush()
}

type flushingReader struct {
	io.ReadCloser
	bw *bufio.Writer
}

func (r flushingReader) Read(p []byte) (int, error) {
	if err := r.bw.Flush(); err != nil {
		return 0, err
	}
	return r.ReadCloser.Read(p)
}

// hopHeaders are the headers of one hop, not forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHopHeaders(hd http.Header) {
	for _, f := range hd.Values("Connection") {
		for _, k := range strings.Split(f, ",") {
			if k = strings.TrimSpace(k); k != "" {
				hd.Del(k)
			}
		}
	}
	for _, k := range hopHeaders {
		hd.Del(k)
	}
}

// serveConnect decides a CONNECT and tunnels it, or terminates TLS for a
// brokered host.
func (h *handler) serveConnect(req *http.Request) {
	host, ps, err := net.SplitHostPort(req.RequestURI)
	port, perr := strconv.Atoi(ps)
	if err != nil || perr != nil || port < 1 || port > 65535 || host == "" {
		writeSimple(h.c, http.StatusBadRequest, "Bad Request", "glovebox egress proxy: CONNECT wants host:port, got "+strconv.Quote(req.RequestURI)+"\n")
		return
	}
	host = normHost(host)
	d := h.ask(host, port, h.decide(host, port))
	ev := event("connect", host, port, d)
	if !d.Allowed() {
		writeBlock(h.c, host, port, d)
		h.emit(ev)
		return
	}
	if d.inspect || h.p.brokers(host, port) {
		// Brokered, or limited by request rules: the proxy terminates the
		// agent's TLS with the box CA to read each request.
		if _, err := io.WriteString(h.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		h.serveBrokered(host, port, d)
		return
	}
	u, err := h.connect(host, port, d)
	if err != nil {
		ev.Decision, ev.Reason = Fail, err.Error()
		writeSimple(h.c, http.StatusBadGateway, "Bad Gateway", "glovebox egress proxy: "+err.Error()+"\n")
		h.emit(ev)
		return
	}
	if _, err := io.WriteString(h.c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		u.Close()
		return
	}
	pipe(h.br, h.c, u)
	ev.BytesOut, ev.BytesIn = u.out.Load(), u.in.Load()
	h.emit(ev)
}

// BlockMessage is the text a blocked agent reads: the destination, the
// rule that blocked it, and how to allow it in glovebox.toml.
func BlockMessage(host string, port int, d Decision) string {
	target := hostPort(host, port)
	var b strings.Builder
	fmt.Fprintf(&b, "glovebox: the connection to %s was blocked by this box's network policy.\n", target)
	fmt.Fprintf(&b, "Reason: %s.\n", d.Reason)
	fmt.Fprintf(&b, "Rule: %s\n", d.Rule)
	b.WriteString("To allow it, change [network] in the box's glovebox.toml (or ask the box's operator to change the policy at runtime):\n")
	switch {
	case strings.HasPrefix(d.Rule, "session: "):
		b.Reset()
		fmt.Fprintf(&b, "glovebox: the connection to %s was blocked by this session's own egress rules.\n", target)
		fmt.Fprintf(&b, "Reason: %s.\n", d.Reason)
		fmt.Fprintf(&b, "Rule: %s\n", d.Rule)
		b.WriteString("The app that opened this session set these rules (an egress frame, or POST /sessions/{id}/egress); only it can change them, and never past the box's glovebox.toml [network] (its session_may_allow lists what a session may open).\n")
	case d.Rule == "built-in: ambiguous paths":
		b.WriteString("  nothing: send the path without dot segments (. or ..), empty segments (//), ;, \\, control characters or double %-encoding; servers differ on what such a path names\n")
	case d.inspect && d.method != "":
		fmt.Fprintf(&b, "  [network]\n  allow = [{ host = %q, methods = [%q], paths = [%q] }]   # a request rule for this method and path, beside %s\n", host, d.method, d.path, d.Rule)
	case d.closure.Addr.IsValid():
		c := d.closure
		addr := c.Addr.String()
		if c.Addr.Is6() {
			addr = "[" + addr + "]"
		}
		rule := fmt.Sprintf("%s:%d", addr, port)
		switch c.Class {
		case netguard.Kit:
			fmt.Fprintf(&b, "  [network]\n  allow = [%q]   # the kit's own port opens only to a rule naming the address and the port\n", rule)
		case netguard.Private:
			fmt.Fprintf(&b, "  [network]\n  allow = [%q]   # this address on this port; to open a private range on purpose (a database on the box's private network), name the range and port: %q\n", rule, privateRange(c.Addr, port))
		default:
			fmt.Fprintf(&b, "  [network]\n  allow = [%q]   # %s addresses are closed unless an allow rule names the address or its range (a wider rule such as 0.0.0.0/0 does not open it)\n", rule, c.What)
		}
		if c.What == "cloud metadata" {
			b.WriteString("  # The metadata service hands out the machine's credentials: open it only if the agent must have them.\n")
		}
	case d.Asked != "":
		fmt.Fprintf(&b, "  [network]\n  allow = [%q]   # the box asked the session's client, which did not allow it\n", hostPort(host, port))
	case d.Rule == `default = "deny"`:
		fmt.Fprintf(&b, "  [network]\n  allow = [%q]   # or %q for every port", target, host)
		if i := strings.IndexByte(host, '.'); i > 0 && strings.Count(host, ".") >= 2 {
			fmt.Fprintf(&b, ", or %q for every subdomain of %s", "*"+host[i:], host[i+1:])
		}
		b.WriteString("\n")
	default:
		fmt.Fprintf(&b, "  [network]\n  deny = [...]   # remove %q: deny always wins over allow\n", d.Rule)
	}
	b.WriteString("Do not retry this connection unchanged: it will be blocked again.\n")
	return b.String()
}

// privateRange is the /24 (IPv4) or /64 (IPv6) around a private address,
// on port: the shape of a rule that opens a private network on purpose.
func privateRange(a netip.Addr, port int) string {
	bits := 24
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	if a.Is6() {
		return fmt.Sprintf("[%s]:%d", p, port)
	}
	return fmt.Sprintf("%s:%d", p, port)
}

// writeBlock answers a blocked request and asks the client to close: 451 for a policy block, 502 when
// the name did not resolve. The status line carries the gist, since many
// tools print only that for a failed CONNECT.
func writeBlock(w io.Writer, host string, port int, d Decision) {
	if d.Verdict == Fail {
		writeSimple(w, http.StatusBadGateway, "Bad Gateway", "glovebox egress proxy: "+d.Reason+"\n")
		return
	}
	body := BlockMessage(host, port, d)
	reason := fmt.Sprintf("Blocked by glovebox egress policy: %s, rule %s", hostPort(host, port), d.Rule)
	fmt.Fprintf(w, "HTTP/1.1 451 %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nX-Glovebox-Egress: blocked\r\nX-Glovebox-Egress-Rule: %s\r\nConnection: close\r\n\r\n%s",
		headerSafe(reason), len(body), headerSafe(d.Rule), body)
}

func writeSimple(w io.Writer, code int, status, body string) {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, status, len(body), body)
}

// headerSafe keeps s to printable ASCII for a header or status line.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
