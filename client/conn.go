package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// getConn returns the live connection, dialling one if there is none.
func (b *Box) getConn(ctx context.Context) (*conn, error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, fmt.Errorf("box %q: %w", b.name, ErrClosed)
		}
		if b.conn != nil && !b.drainUntil.IsZero() && len(b.inflight) == 0 {
			// The box said it is shutting down and nothing is left on
			// its socket: leave it, and dial afresh (a load balancer sends
			// the new session to another instance).
			old := b.conn
			b.conn, b.session, b.lastSeq, b.drainUntil = nil, "", 0, time.Time{}
			b.mu.Unlock()
			b.log.Info("leaving a draining box's socket for a new session")
			old.shutdown(wsconn.CloseNormal, "the box is draining")
			continue
		}
		if b.conn != nil {
			c := b.conn
			b.mu.Unlock()
			return c, nil
		}
		if wait := b.connecting; wait != nil {
			b.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wait := make(chan struct{})
		b.connecting = wait
		resume := b.resumable()
		b.mu.Unlock()

		c, err := b.dial(ctx, resume)
		b.mu.Lock()
		b.connecting = nil
		close(wait)
		if err == nil {
			if b.closed {
				b.mu.Unlock()
				c.shutdown(wsconn.CloseNormal, "client closed")
				return nil, fmt.Errorf("box %q: %w", b.name, ErrClosed)
			}
			b.install(c)
		}
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// resumable reports whether the next dial should ask to resume. b.mu is
// held.
func (b *Box) resumable() bool { return (b.caps[protocol.CapResume] || b.attach) && b.session != "" }

// dial opens a socket and sends the client hello. With resume, it asks the
// box to resume the session and reads the box's hello before returning.
func (b *Box) dial(ctx context.Context, resume bool) (*conn, error) {
	u := *b.ws
	var session string
	var last uint64
	if resume {
		b.mu.Lock()
		session, last = b.session, b.lastSeq
		b.mu.Unlock()
		q := u.Query()
		q.Set("resume", session)
		q.Set("last_seq", strconv.FormatUint(last, 10))
		u.RawQuery = q.Encode()
	}
	dctx, cancel := context.WithTimeout(ctx, b.opts.dialTimeout)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)() // Close ends a dial under way
	h := http.Header{}
	h.Set("Authorization", "Bearer "+b.ep.Key)
	ws, resp, err := wsconn.Dial(dctx, u.String(), wsconn.DialOptions{Header: h, HandshakeTimeout: b.opts.dialTimeout})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("connect to box %q at %s: %w: the box refused the key (check GLOVEBOX_KEY)", b.name, b.ws.Redacted(), ErrUnauthorized)
		}
		if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
			return nil, fmt.Errorf("connect to box %q at %s: HTTP %s: the box is shutting down or full; retry after %s, or use another endpoint", b.name, b.ws.Redacted(), resp.Status, cmp.Or(resp.Header.Get("Retry-After"), "1")+"s")
		}
		if resp != nil {
			return nil, fmt.Errorf("connect to box %q at %s: HTTP %s", b.name, b.ws.Redacted(), resp.Status)
		}
		return nil, fmt.Errorf("connect to box %q at %s: %w", b.name, b.ws.Redacted(), err)
	}
	ws.SetReadLimit(b.opts.maxMessage)
	c := &conn{ws: ws, out: make(chan []byte, 64), quit: make(chan struct{})}
	b.mu.Lock()
	egress := b.egress
	b.mu.Unlock()
	hello, _ := protocol.Encode(&protocol.ClientHello{Capabilities: []string{protocol.CapResume}, Egress: egress})
	ws.SetWriteDeadline(time.Now().Add(b.opts.dialTimeout))
	if err := ws.WriteText(hello); err != nil {
		ws.Close()
		return nil, fmt.Errorf("connect to box %q: send hello: %w", b.name, err)
	}
	ws.SetWriteDeadline(time.Time{})
	if !resume {
		return c, nil
	}
	// A box that announced resume sends its hello first; wait for it so
	// the replay that follows is read against the right session.
	ws.SetReadDeadline(time.Now().Add(b.opts.dialTimeout))
	data, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("connect to box %q: read hello: %w", b.name, err)
	}
	ws.SetReadDeadline(time.Time{})
	m, err := protocol.DecodeServer(data)
	h2, ok := m.(*protocol.ServerHello)
	if err != nil || !ok {
		ws.Close()
		return nil, fmt.Errorf("connect to box %q: the box answered a resume without a hello", b.name)
	}
	c.resumed = h2.Resumed && h2.SessionID == session
	c.replayUntil = h2.LastSeq
	if h2.Restarted {
		// A persistent session after the box restarted: the frames the
		// client missed are gone, none is replayed; resend at once.
		c.replayUntil = 0
	}
	b.mu.Lock()
	b.applyHello(h2)
	b.egressHello = egress != nil && b.caps[protocol.CapEgressRules]
	b.mu.Unlock()
	return c, nil
}

// applyHello records the box's hello. b.mu is held.
func (b *Box) applyHello(h *protocol.ServerHello) {
	if !h.Resumed || h.SessionID != b.session {
		b.lastSeq = 0
		b.drainUntil = time.Time{} // a new session: perhaps another instance
	}
	b.session, b.attach = h.SessionID, false
	b.caps = make(map[string]bool, len(h.Capabilities))
	for _, c := range h.Capabilities {
		b.caps[c] = true
	}
	b.egressView = h.Egress
}

// install makes c the live connection and starts its goroutines. b.mu is
// held.
func (b *Box) install(c *conn) {
	b.conn = c
	b.wg.Add(2)
	go b.read(c)
	go b.write(c)
	if c.resumed {
		for _, r := range b.inflight {
			if !r.seen && r.frame != nil {
				c.unacked = append(c.unacked, r)
			}
		}
	}
	b.resend(c)
}

// resend sends again, once the replay of a resumed session is in, the
// prompts in flight the box has sent nothing about: their frame may have
// been written to the socket that dropped and never reached the box. A
// prompt the box does have is refused as a duplicate, which the prompt
// ignores. (A prompt that the box finishes between the replay and the
// resend would run twice; the window is the time the box takes to read
// the resend.) b.mu is held.
func (b *Box) resend(c *conn) {
	if !c.resumed || c.resendDone || b.lastSeq < c.replayUntil || b.conn != c {
		return
	}
	c.resendDone = true
	var frames [][]byte
	for _, r := range c.unacked {
		if b.inflight[r.id] == r && !r.seen && r.frame != nil {
			r.resent = true
			frames = append(frames, r.frame)
		}
	}
	c.unacked = nil
	if len(frames) == 0 {
		return
	}
	b.log.Info("sending again prompts the box has not acknowledged", "count", len(frames))
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for _, f := range frames {
			select {
			case c.out <- f:
			case <-c.quit:
				return
			}
		}
	}()
}

// conn is one socket: a reader goroutine, a writer goroutine, and the
// bounded queue of frames to write.
type conn struct {
	ws      *wsconn.Conn
	out     chan []byte
	quit    chan struct{} // closed by shutdown
	once    sync.Once
	resumed bool // the box resumed the session on this socket
	// replayUntil is the box's last seq when it resumed: frames up to it
	// are the replay. Once they are in, prompts the box never
	// acknowledged are sent again (see resend).
	replayUntil uint64
	resendDone  bool
	unacked     []*Result // prompts in flight, not acknowledged, when c was installed
}

// shutdown sends a close frame and closes the socket, once. A box takes a
// close frame as the end of the session, so it is sent only when the
// client means to end it.
func (c *conn) shutdown(code int, reason string) {
	c.once.Do(func() {
		close(c.quit)
		c.ws.WriteClose(code, reason, time.Now().Add(time.Second))
		c.ws.Close()
	})
}

// kill closes a broken socket without a close frame, so that the box keeps
// the session for a resume.
func (c *conn) kill() {
	c.once.Do(func() {
		close(c.quit)
		c.ws.Close()
	})
}

// trySend queues a frame without waiting; it reports whether it did.
func (c *conn) trySend(m protocol.ClientMessage) bool {
	frame, err := protocol.Encode(m)
	if err != nil {
		return false
	}
	select {
	case c.out <- frame:
		return true
	default:
		return false
	}
}

func (b *Box) write(c *conn) {
	defer b.wg.Done()
	var tick <-chan time.Time
	if b.opts.keepalive > 0 {
		t := time.NewTicker(b.opts.keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case frame := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(b.opts.dialTimeout + time.Duration(len(frame)>>16)*time.Second))
			if err := c.ws.WriteText(frame); err != nil {
				c.kill()
				return
			}
		case <-tick:
			if err := c.ws.Ping(time.Now().Add(b.opts.dialTimeout)); err != nil {
				c.kill()
				return
			}
		case <-c.quit:
			return
		}
	}
}

func (b *Box) read(c *conn) {
	defer b.wg.Done()
	idle := 2 * b.opts.keepalive
	// Moving the socket's deadline resets a runtime timer under a lock: a
	// stream of frames moves it once an eighth of idle, not once a frame,
	// so a silent box is dropped after 7/8 to all of idle.
	var extended time.Time
	extend := func() {
		if idle <= 0 {
			return
		}
		if now := time.Now(); now.Sub(extended) >= idle/8 {
			extended = now
			c.ws.SetReadDeadline(now.Add(idle))
		}
	}
	c.ws.SetPongHandler(extend)
	for {
		extend()
		data, err := c.ws.ReadMessage()
		if err != nil {
			c.kill()
			b.dropped(c, err)
			return
		}
		b.handle(c, data)
	}
}

// dropped handles the loss of socket c: prompts in flight are resumed on a
// new socket when the box supports it, and failed otherwise.
func (b *Box) dropped(c *conn, cause error) {
	b.mu.Lock()
	if b.conn != c || b.closed {
		b.mu.Unlock()
		return
	}
	b.conn = nil
	if len(b.inflight) == 0 {
		b.mu.Unlock()
		return // the next use dials again (resuming if it can)
	}
	if b.resumable() && b.opts.attempts > 0 {
		wait := make(chan struct{})
		b.connecting = wait
		b.wg.Add(1)
		b.mu.Unlock()
		b.log.Info("socket dropped; resuming", "err", cause)
		go b.reconnect(wait, cause)
		return
	}
	victims := b.takeInflight()
	b.mu.Unlock()
	err := fmt.Errorf("box %q: %w: %v (the box does not support resume)", b.name, ErrConnectionLost, cause)
	for _, r := range victims {
		r.finish(nil, err)
	}
}

// reconnect redials a dropped socket with backoff and jitter and resumes
// its session. wait is closed when it is done.
func (b *Box) reconnect(wait chan struct{}, cause error) {
	defer b.wg.Done()
	lastErr := cause
	delay := b.opts.backoff
	var c *conn
attempts:
	for attempt := 0; attempt < b.opts.attempts; attempt++ {
		t := time.NewTimer(jitter(delay, rand.N[time.Duration]))
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			lastErr = ErrClosed
			break attempts
		}
		var err error
		c, err = b.dial(b.ctx, true)
		if err == nil {
			break
		}
		lastErr = err
		b.log.Info("reconnect failed", "attempt", attempt+1, "err", err)
		if errors.Is(err, ErrUnauthorized) {
			break
		}
		delay = nextDelay(delay, b.opts.maxBackoff)
	}
	b.mu.Lock()
	b.connecting = nil
	close(wait)
	if c != nil && b.closed {
		b.mu.Unlock()
		c.shutdown(wsconn.CloseNormal, "client closed")
		return
	}
	if c != nil {
		b.install(c)
		if c.resumed {
			b.mu.Unlock()
			b.log.Info("session resumed")
			return
		}
		lastErr = errors.New("the box did not resume the session (it expired or the box restarted)")
	}
	victims := b.takeInflight()
	b.mu.Unlock()
	err := fmt.Errorf("box %q: %w: %v", b.name, ErrConnectionLost, lastErr)
	for _, r := range victims {
		r.finish(nil, err)
	}
}

// jitter spreads a delay over [d/2, d], so that clients dropped together
// do not redial together. n(k) returns a random value in [0, k).
func jitter(d time.Duration, n func(time.Duration) time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + n(d/2+1)
}

// nextDelay doubles a delay up to max.
func nextDelay(d, max time.Duration) time.Duration { return min(2*d, max) }
