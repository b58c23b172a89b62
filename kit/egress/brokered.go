package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// serveBrokered terminates the agent's TLS with a certificate for host
// from the box CA and forwards each request over a verified TLS
// connection to the real host, with the secrets brokered. Each request is
// decided on its own (the host's request rules see its method and path);
// the upstream connection is kept across requests while the host keeps it.
func (h *handler) serveBrokered(host string, port int, d Decision) {
	tc, ok := h.terminateTLS(host, port, d)
	if !ok {
		return
	}
	defer tc.Close()
	lim := &limiter{r: tc}
	br := bufio.NewReader(lim)
	var up *brokeredUpstream
	defer func() {
		if up != nil {
			up.tls.Close()
		}
	}()
	for {
		req, ok := h.nextBrokeredRequest(tc, lim, br)
		if !ok {
			return
		}
		var same *upstream
		if up != nil {
			same = up.raw
		}
		dd := h.decideRequest(host, port, req, same)
		ev := event("https", host, port, dd)
		if !dd.Allowed() {
			writeBlock(tc, host, port, dd)
			h.emit(ev)
			return
		}
		if up == nil {
			var err error
			if up, err = h.dialBrokered(host, port, dd); err != nil {
				ev.Decision, ev.Reason = Fail, err.Error()
				writeSimple(tc, http.StatusBadGateway, "Bad Gateway", "glovebox egress proxy: "+err.Error()+"\n")
				h.emit(ev)
				return
			}
		}
		h.brokerRequest(tc, req, host, port, &ev)
		open, upOpen := h.forwardBrokered(tc, up, req, host, port, &ev)
		h.emit(ev)
		if !open {
			return
		}
		if !upOpen {
			up.tls.Close()
			up = nil
		}
	}
}

// brokeredUpstream is the verified TLS connection to the real host that a
// brokered connection's requests go over.
type brokeredUpstream struct {
	raw *upstream // counts the bytes each way
	tls *tls.Conn
	br  *bufio.Reader
}

// terminateTLS answers the agent's TLS handshake with a certificate for
// host from the box CA. A failed handshake is reported as an event and
// reports false, as does a certificate that cannot be made.
func (h *handler) terminateTLS(host string, port int, d Decision) (*tls.Conn, bool) {
	cert, err := h.p.ca.leaf(host, h.p.now())
	if err != nil {
		h.p.log.Error("egress: certificate for a brokered host", "host", host, "err", err)
		return nil, false
	}
	tc := tls.Server(&bufferedConn{Conn: h.c, r: h.br}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		ev := event("https", host, port, d)
		ev.Decision, ev.Reason = Fail, "the agent's TLS handshake failed (does it trust the box CA? see SSL_CERT_FILE): "+err.Error()
		h.emit(ev)
		tc.Close()
		return nil, false
	}
	return tc, true
}

// nextBrokeredRequest reads the agent's next request, waiting idleTimeout
// at most for it to start. It reports false when the connection is done:
// closed, idle, unreadable, or with a head over 1MB (answered with 431).
func (h *handler) nextBrokeredRequest(tc *tls.Conn, lim *limiter, br *bufio.Reader) (*http.Request, bool) {
	h.c.SetReadDeadline(time.Now().Add(idleTimeout))
	lim.head()
	req, err := http.ReadRequest(br)
	lim.unlimit()
	if errors.Is(err, errHeadTooLarge) {
		writeSimple(tc, http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large", "glovebox egress proxy: the request head is larger than 1MB\n")
		return nil, false
	}
	if err != nil {
		return nil, false
	}
	h.c.SetReadDeadline(time.Time{})
	return req, true
}

// dialBrokered connects to one of d's addresses and verifies the host's
// certificate against the proxy's roots.
func (h *handler) dialBrokered(host string, port int, d Decision) (*brokeredUpstream, error) {
	u, err := h.connect(host, port, d)
	if err != nil {
		return nil, err
	}
	ut := tls.Client(u, &tls.Config{ServerName: host, RootCAs: h.p.opts.RootCAs, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	hctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	err = ut.HandshakeContext(hctx)
	cancel()
	if err != nil {
		u.Close()
		return nil, fmt.Errorf("TLS to %s: %w", hostPort(host, port), err)
	}
	return &brokeredUpstream{raw: u, tls: ut, br: bufio.NewReader(ut)}, nil
}

// brokerRequest puts the host's secrets in place of their placeholders,
// strips placeholders meant for other hosts (noting both in ev), and
// readies req to be sent as is to the host.
func (h *handler) brokerRequest(tc io.Writer, req *http.Request, host string, port int, ev *Event) {
	ev.Brokered, ev.Stripped = h.p.broker(req.Header, host, port)
	ev.Stripped = appendNew(ev.Stripped, h.p.stripURL(req.URL)...)
	if len(ev.Stripped) > 0 {
		h.p.log.Warn("egress: placeholders stripped", "session", h.s.ID, "host", host, "secrets", ev.Stripped)
	}
	if req.Header.Get("Expect") == "100-continue" {
		io.WriteString(tc, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	removeHopHeaders(req.Header)
	req.Header.Del("Expect")
	// The answer is read for the secret, so it must come readable.
	req.Header.Set("Accept-Encoding", "identity")
	req.RequestURI = ""
	req.URL.Scheme, req.URL.Host = "", ""
	req.Host = host // the key goes with the host it is for, whatever the Host header said
	if port != 443 {
		req.Host = hostPort(host, port)
	}
}

// forwardBrokered sends req over up and writes the answer, with any secret
// it echoes removed, to the agent; it fills ev's byte counts and, on
// failure, its reason. It reports whether the agent's connection stays
// open for another request, and whether the upstream does.
func (h *handler) forwardBrokered(tc io.Writer, up *brokeredUpstream, req *http.Request, host string, port int, ev *Event) (open, upOpen bool) {
	out0, in0 := up.raw.out.Load(), up.raw.in.Load()
	fail := func(err error) (bool, bool) {
		ev.Decision, ev.Reason = Fail, err.Error()
		writeSimple(tc, http.StatusBadGateway, "Bad Gateway", "glovebox egress proxy: "+hostPort(host, port)+": "+err.Error()+"\n")
		ev.BytesOut, ev.BytesIn = up.raw.out.Load()-out0, up.raw.in.Load()-in0
		return false, false
	}
	clientClose := req.Close
	req.Close = false
	resp, err := roundTrip(up.tls, up.br, req)
	if err != nil {
		return fail(err)
	}
	upClose := resp.Close
	removeHopHeaders(resp.Header)
	hits := 0
	if err := h.p.scrubResponse(resp, &hits); err != nil {
		resp.Body.Close()
		return fail(err)
	}
	resp.Close = clientClose
	err = writeResponse(tc, resp)
	resp.Body.Close()
	ev.BytesOut, ev.BytesIn = up.raw.out.Load()-out0, up.raw.in.Load()-in0
	if hits > 0 {
		ev.Scrubbed = hits
		h.p.log.Warn("egress: a brokered host sent a secret back; removed", "session", h.s.ID, "host", host, "times", hits)
	}
	return err == nil && !resp.Close, !upClose
}

// bufferedConn reads through the bufio.Reader that already holds what
// the client sent after its CONNECT.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
