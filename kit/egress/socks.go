package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// SOCKS5 (RFC 1928), CONNECT only, no authentication.
const (
	socksVersion = 5

	socksCmdConnect = 1

	socksAtypIPv4   = 1
	socksAtypDomain = 3
	socksAtypIPv6   = 4

	socksSucceeded       = 0
	socksGeneralFailure  = 1
	socksNotAllowed      = 2 // connection not allowed by ruleset
	socksHostUnreachable = 4
	socksRefused         = 5
	socksCmdUnsupported  = 7
	socksAtypUnsupported = 8
)

// socksRequest is a parsed SOCKS5 greeting and request.
type socksRequest struct {
	cmd  byte
	host string // a name or an address
	port int
}

var errSocksNoAuth = errors.New("socks: the client offers no method without authentication")

// readSOCKS reads the greeting, answers it, and reads the request. The
// greeting answer is written to w once the methods are read.
func readSOCKS(r io.Reader, w io.Writer) (socksRequest, error) {
	var req socksRequest
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return req, fmt.Errorf("socks: read the greeting: %w", err)
	}
	if hdr[0] != socksVersion {
		return req, fmt.Errorf("socks: version %d, want 5", hdr[0])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return req, fmt.Errorf("socks: read the methods: %w", err)
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		w.Write([]byte{socksVersion, 0xff})
		return req, errSocksNoAuth
	}
	if _, err := w.Write([]byte{socksVersion, 0}); err != nil {
		return req, err
	}
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return req, fmt.Errorf("socks: read the request: %w", err)
	}
	if head[0] != socksVersion {
		return req, fmt.Errorf("socks: request version %d, want 5", head[0])
	}
	req.cmd = head[1]
	switch head[3] {
	case socksAtypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return req, err
		}
		req.host = netip.AddrFrom4(a).String()
	case socksAtypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return req, err
		}
		req.host = netip.AddrFrom16(a).String()
	case socksAtypDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return req, err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return req, err
		}
		req.host = string(name)
	default:
		return req, fmt.Errorf("socks: address type %d: %w", head[3], errSocksAtyp)
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return req, err
	}
	req.port = int(binary.BigEndian.Uint16(port[:]))
	return req, nil
}

var errSocksAtyp = errors.New("unsupported address type")

func socksReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// serveSOCKS serves one SOCKS5 connection: decide, refuse at once or
// tunnel.
func (h *handler) serveSOCKS() {
	h.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	req, err := readSOCKS(h.br, h.c)
	h.lim.unlimit()
	if err != nil {
		if errors.Is(err, errSocksAtyp) {
			socksReply(h.c, socksAtypUnsupported)
		}
		return
	}
	h.c.SetReadDeadline(time.Time{})
	if req.cmd != socksCmdConnect {
		socksReply(h.c, socksCmdUnsupported)
		return
	}
	host := normHost(req.host)
	ev := Event{Proto: "socks", Host: host, Port: req.port}
	if req.port == 0 {
		ev.Decision, ev.Reason = Deny, "port 0"
		socksReply(h.c, socksNotAllowed)
		h.emit(ev)
		return
	}
	d := h.ask(host, req.port, h.decide(host, req.port))
	ev = event("socks", host, req.port, d)
	if !d.Allowed() {
		code := byte(socksNotAllowed)
		if d.Verdict == Fail {
			code = socksHostUnreachable
		}
		socksReply(h.c, code)
		h.emit(ev)
		return
	}
	if d.inspect || h.p.brokers(host, req.port) {
		if err := socksReply(h.c, socksSucceeded); err == nil {
			h.serveBrokered(host, req.port, d)
		}
		return
	}
	u, err := h.connect(host, req.port, d)
	if err != nil {
		code := byte(socksGeneralFailure)
		if strings.Contains(err.Error(), "refused") {
			code = socksRefused
		}
		socksReply(h.c, code)
		ev.Decision, ev.Reason = Fail, err.Error()
		h.emit(ev)
		return
	}
	if err := socksReply(h.c, socksSucceeded); err != nil {
		u.Close()
		return
	}
	pipe(h.br, h.c, u)
	ev.BytesOut, ev.BytesIn = u.out.Load(), u.in.Load()
	h.emit(ev)
}
