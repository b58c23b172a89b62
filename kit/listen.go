package kit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	// idleTimeout closes a keep-alive connection that sent no request for
	// this long.
	idleTimeout = 60 * time.Second
	// readHeaderTimeout bounds reading a request's headers.
	readHeaderTimeout = 10 * time.Second
	// spareSlots is how many connections over the cap may be answered at
	// once: /health, or a 503 that says the box is full.
	spareSlots = 8
	// spareWait bounds a spare slot's whole exchange.
	spareWait = 5 * time.Second
	// connHeadroom is what the default connection cap leaves above the
	// session cap, for /health, /environment and /files.
	connHeadroom = 256
)

// defaultMaxConns is the connection cap when the manifest sets none: room
// for every session plus some, and never more than half the descriptors
// the kit may open (the other half is for sessions' pipes, files and the
// store).
func defaultMaxConns(maxSessions int) int {
	n := maxSessions + connHeadroom
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 && rl.Cur/2 < uint64(n) {
		n = int(rl.Cur / 2)
	}
	return max(n, 16)
}

// gate wraps the kit's listener with a connection cap. Connections not
// yet upgraded to a WebSocket (authenticated or not: before its headers
// are read no request is) may take at most half of it, so that an idle
// or slow crowd cannot keep new sessions out; when the cap is reached the
// keep-alive connection idle the longest is closed to make room, and
// when none is idle the new connection gets one of a few spare slots,
// which answer GET /health and refuse anything else with a 503 that says
// why.
type gate struct {
	net.Listener
	max, maxPending int
	health          http.HandlerFunc
	log             *slog.Logger
	spare           chan struct{}

	mu      sync.Mutex
	conns   map[*gateConn]struct{}
	pending int // admitted and not hijacked
}

func newGate(ln net.Listener, maxConns int, health http.HandlerFunc, log *slog.Logger) *gate {
	return &gate{
		Listener:   ln,
		max:        maxConns,
		maxPending: max(maxConns/2, 1),
		health:     health,
		log:        log,
		spare:      make(chan struct{}, spareSlots),
		conns:      map[*gateConn]struct{}{},
	}
}

// gateConn is an admitted connection; it frees its place when closed.
type gateConn struct {
	net.Conn
	g    *gate
	once sync.Once

	// Under g.mu:
	state    http.ConnState
	since    time.Time // when it entered state
	hijacked bool
}

func (c *gateConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.release(c) })
	return err
}

var _ io.ReaderFrom = (*gateConn)(nil)

// ReadFrom is the socket's own, so that a response copied from a file
// goes by sendfile (http.ServeContent of a session's file, kit/fsapi).
func (c *gateConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// SyscallConn reaches the socket underneath, for the idle wait of
// wsconn.Conn.WaitReadable.
func (c *gateConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("kit: not a socket")
	}
	return sc.SyscallConn()
}

// Accept implements net.Listener.
func (g *gate) Accept() (net.Conn, error) {
	for {
		nc, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := g.admit(nc); c != nil {
			return c, nil
		}
		select {
		case g.spare <- struct{}{}:
			go g.answerSpare(nc)
		default:
			nc.Close()
		}
	}
}

// admit counts nc in, closing the longest-idle connection first when the
// cap or the pending share is reached. It returns nil when nothing could
// make room.
func (g *gate) admit(nc net.Conn) *gateConn {
	for range 4 {
		g.mu.Lock()
		if len(g.conns) < g.max && g.pending < g.maxPending {
			c := &gateConn{Conn: nc, g: g, state: http.StateNew, since: time.Now()}
			g.conns[c] = struct{}{}
			g.pending++
			g.mu.Unlock()
			return c
		}
		victim := g.oldestIdle()
		g.mu.Unlock()
		if victim == nil {
			return nil
		}
		victim.Close()
	}
	return nil
}

// oldestIdle is the keep-alive connection idle the longest, or else the
// oldest one that has sent nothing yet. g.mu is held.
func (g *gate) oldestIdle() *gateConn {
	var best *gateConn
	rank := func(c *gateConn) int {
		switch c.state {
		case http.StateIdle:
			return 2
		case http.StateNew:
			return 1
		}
		return 0
	}
	for c := range g.conns {
		if c.hijacked || rank(c) == 0 {
			continue
		}
		if best == nil || rank(c) > rank(best) || rank(c) == rank(best) && c.since.Before(best.since) {
			best = c
		}
	}
	return best
}

func (g *gate) release(c *gateConn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.conns[c]; !ok {
		return
	}
	delete(g.conns, c)
	if !c.hijacked {
		g.pending--
	}
}

// connState is the http.Server's ConnState hook.
func (g *gate) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*gateConn)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.conns[c]; !ok {
		return
	}
	c.state, c.since = st, time.Now()
	if st == http.StateHijacked && !c.hijacked {
		c.hijacked = true
		g.pending--
	}
}

// count reports the admitted connections and those not hijacked.
func (g *gate) count() (all, pending int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns), g.pending
}

// answerSpare serves one request on a connection over the cap: /health
// and /health/live as usual, anything else a 503.
func (g *gate) answerSpare(nc net.Conn) {
	defer func() { <-g.spare }()
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(spareWait))
	req, err := http.ReadRequest(bufio.NewReaderSize(nc, 4096))
	if err != nil {
		return
	}
	w := &spareWriter{h: http.Header{}}
	if req.URL.Path == "/health" || req.URL.Path == livePath {
		g.health(w, req)
	} else {
		msg := fmt.Sprintf("glovebox: the box has %d connections open, its limit (limits.max_connections); try again shortly\n", g.max)
		w.h.Set("Content-Type", "text/plain; charset=utf-8")
		w.h.Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(msg))
		g.log.Warn("connection refused: the connection cap is reached", "max_connections", g.max, "path", req.URL.Path)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.h.Set("Connection", "close")
	w.h.Set("Content-Length", strconv.Itoa(len(w.body)))
	resp := &http.Response{
		StatusCode: w.status, ProtoMajor: 1, ProtoMinor: 1, Header: w.h, Request: req,
		ContentLength: int64(len(w.body)), Close: true,
	}
	if req.Method != http.MethodHead {
		resp.Body = io.NopCloser(bytes.NewReader(w.body))
	}
	resp.Write(nc)
}

// spareWriter collects a spare slot's short answer.
type spareWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *spareWriter) Header() http.Header { return w.h }
func (w *spareWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *spareWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, p...)
	return len(p), nil
}
