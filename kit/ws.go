package kit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A connection's path: serveWS authenticates and upgrades it and opens or
// resumes its session; a reader goroutine (or, while the connection is
// idle, the parker) reads its frames and hands each to the session's
// handle, which passes it to the part it is for.

// anyFile is the box key's file check: every file.
func anyFile(string) bool { return true }

// serveWS authenticates and upgrades a connection and starts its reader
// and writer.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	tok, ok := route.Bearer(r)
	if !ok {
		tok, ok = bearerSubprotocol(r)
	}
	who, ok := s.auth.connectIdentity(tok, ok)
	if !ok {
		route.Unauthorized(w)
		return
	}
	if s.drain.draining.Load() {
		refuseDraining(w)
		return
	}
	fresh := s.reserve(who)
	if fresh == nil {
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()

	ws, err := wsconn.Upgrade(w, r, wsconn.UpgradeOptions{
		Subprotocols:   []string{SubprotocolV1},
		ReadBufferSize: readBufferSize,
	})
	if err != nil {
		// Upgrade has answered the request already.
		s.log.Debug("websocket upgrade", "err", err)
		fresh.end(errClosed) // a warm one holds an agent and directories
		return
	}
	c := newConn(ws, s)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.memory.note()

	s.grantFiles(fresh, who, tok)
	ss, resumeFailed := fresh, ""
	if rid := r.URL.Query().Get("resume"); rid != "" {
		ss, resumeFailed = s.resumeTarget(r, rid, fresh, who, c)
	}
	s.opened(ss, fresh, c, who, resumeFailed)
	if ss.ctx.Err() != nil {
		c.close() // the box closed during the upgrade
	}
	// The connection is read by a goroutine of its own, so that the
	// handler's goroutine, whose stack grew while serving HTTP, is freed.
	// That reader parks the connection whenever it is idle: an idle
	// connection then holds no goroutine.
	c.sess = ss
	c.ws.SetReadLimit(s.maxMessage)
	wait := 2 * s.pingInterval
	c.setReadDeadline(time.Now().Add(wait))
	c.ws.SetPongHandler(func() { c.setReadDeadline(time.Now().Add(wait)) })
	s.wg.Add(1) // the reader's, carried on while it is parked
	go s.reader(c)
}

// grantFiles says which parked files a new session may read as inputs:
// every one for the key, else those its token's files scope allows.
func (s *Server) grantFiles(fresh *session, who, tok string) {
	if who == identityKey {
		// The key reads every file; sharing one func keeps the request's
		// header (which tok points into) out of an idle session.
		fresh.mayReadFile = anyFile
		return
	}
	tok = strings.Clone(tok)
	fresh.mayReadFile = func(id string) bool { return s.auth.authorized(tok, true, protocol.ScopeFiles, id) }
}

// resumeTarget is the session a connection asking to resume session rid
// (?resume=, ?last_seq=) continues: that session, now attached to c, or
// fresh with the reason the resume failed. Nothing a foreign or
// impossible resume asks may disturb the session: it is checked before
// the session's socket is touched.
func (s *Server) resumeTarget(r *http.Request, rid string, fresh *session, who string, c *conn) (*session, string) {
	last, perr := strconv.ParseUint(r.URL.Query().Get("last_seq"), 10, 64)
	old := s.lookup(rid)
	switch {
	case perr != nil:
		return fresh, fmt.Sprintf("cannot resume session %s: last_seq must be a whole number", rid)
	case old == nil || old == fresh || old.owner != who:
		// A session opened with another credential looks unknown: its
		// id must not be confirmed to whoever guessed or stole it.
		if old != nil && old != fresh {
			s.log.Warn("resume refused: the session was opened with another credential", "session", rid)
		}
		return fresh, fmt.Sprintf("cannot resume session %s: it is unknown or expired", rid)
	case last > old.stream.lastSeq.Load():
		return fresh, fmt.Sprintf("cannot resume session %s from seq %d: the session has sent only %d frames", rid, last, old.stream.lastSeq.Load())
	case !old.stream.resumable():
		return fresh, fmt.Sprintf("cannot resume session %s: its client did not announce the resume capability", rid)
	}
	// Its client is back: awake before the client hears so (wake logs
	// what fails).
	_ = old.wake()
	restored := old.restored()
	if !old.stream.resume(c, last) {
		// A resume that fails as the box shuts down leaves the session to
		// the shutdown, which keeps a persistent one (persist.go).
		if s.ctx.Err() == nil {
			old.end(errClosed)
		}
		return fresh, fmt.Sprintf("cannot resume session %s from seq %d: it has ended or no longer holds the frames after it", rid, last)
	}
	fresh.end(errClosed)
	// A pause that fired between the wake and the resume: undone now
	// that the client is attached (no pause comes after that).
	_ = old.wake()
	if restored {
		old.afterRestoredResume() // persist.go
	}
	return old, ""
}

// opened attaches c to ss when it is the fresh session (telling its
// client why a resume failed, if one did), and counts and logs the
// session's opening or resumption.
func (s *Server) opened(ss, fresh *session, c *conn, who, resumeFailed string) {
	if ss != fresh {
		s.obs.ResumesTotal.Add(1)
		s.log.Info("session resumed", "session", ss.id, "owner", ownerKind(who), "last_seq", ss.stream.lastSeq.Load())
		return
	}
	ss.opened.Store(true)
	s.obs.SessionsTotal.Add(1)
	s.limitLifetime(ss)
	ss.stream.attach(c)
	if resumeFailed != "" {
		ss.stream.sendError(context.Background(), "", protocol.CodeResumeFailed, resumeFailed)
	}
	s.log.Info("session opened", "session", ss.id, "owner", ownerKind(who), "resume_failed", resumeFailed != "")
}

// reader reads c until it parks or ends; when it ends, it tears the
// connection down. It holds one count in s.wg, which a parked connection
// keeps and the reader started when it wakes carries on.
func (s *Server) reader(c *conn) {
	clean, parked := s.readLoop(c.sess, c)
	if parked {
		return
	}
	defer s.wg.Done()
	c.finish()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.memory.note()
	c.sess.stream.connGone(c, clean)
}

// park registers c in the server's epoll set, made on first use. It
// reports false when the server is closing or cannot park.
func (s *Server) park(c *conn, fd uintptr) bool {
	p := s.parker.Load()
	if p == nil {
		s.mu.Lock()
		if s.closed || s.noPark {
			s.mu.Unlock()
			return false
		}
		if p = s.parker.Load(); p == nil {
			np, err := newParker(func(c *conn) { go s.reader(c) })
			if err != nil {
				s.noPark = true
				s.mu.Unlock()
				s.log.Warn("idle connections keep their goroutines", "err", err)
				return false
			}
			s.parker.Store(np)
			p = np
		}
		s.mu.Unlock()
	}
	return p.park(c, fd)
}

// closeAbnormal is the code a read error carries when the connection
// dropped without a close frame (RFC 6455 7.4.1: never sent on the wire).
const closeAbnormal = 1006

// readLoop reads frames until the connection ends or parks. clean
// reports whether the client ended it with a close frame (or the server is
// closing). A connection whose read deadline has passed does not park:
// its wait meets the deadline.
func (s *Server) readLoop(ss *session, c *conn) (clean, parked bool) {
	wait := 2 * s.pingInterval
	register := func(fd uintptr) bool { return s.park(c, fd) }
	active := false // a frame was handled: linger before parking
	for {
		var err error
		switch {
		case active && c.linger():
			// A frame came (or an error the read meets).
		case time.Now().UnixNano() < c.readBy.Load() && c.ws.Park(register):
			return false, true
		default:
			err = c.ws.WaitReadable()
		}
		active = false
		var data []byte
		release := func() {}
		if err == nil {
			data, release, err = s.budget.readFrame(s.ctx, c.ws, wait)
		}
		if errors.Is(err, errBudget) {
			ss.logger().Warn("connection ended: a frame waited too long for memory", "frame_budget", s.budget.frameBudget)
			c.ws.WriteClose(wsconn.CloseTryAgainLater, "the box is busy reading other frames; try again", time.Now().Add(closeWait))
			return false, false
		}
		if err != nil {
			code := wsconn.CloseCode(err)
			ss.logger().Debug("connection ended", "err", err, "close_code", code)
			return (code != 0 && code != closeAbnormal) || s.ctx.Err() != nil, false
		}
		now := time.Now()
		c.setReadDeadline(now.Add(wait))
		ss.lastActive.Store(now.UnixNano())
		ss.handle(c, data)
		release()
		active = true
	}
}

// handle dispatches one client frame.
func (ss *session) handle(c *conn, data []byte) {
	m, err := protocol.DecodeClient(data)
	if err != nil {
		if errors.Is(err, protocol.ErrUnknownType) {
			ss.logger().Debug("ignoring frame of unknown type", "err", err)
			return
		}
		ss.stream.sendError(context.Background(), protocol.PeekID(data), protocol.CodeBadMessage, err.Error())
		return
	}
	switch m := m.(type) {
	case *protocol.Ping:
		b, _ := protocol.Encode(&protocol.Pong{TS: m.TS})
		c.sendNow(b) // the reader writes it: no writer to wake
	case *protocol.Prompt:
		ss.prompts.enqueue(m)
	case *protocol.Abort:
		ss.prompts.abort(m.ID)
	case *protocol.DisplayResolve:
		ss.slots.settle(m.SlotID, slotResult{value: m.Value})
	case *protocol.DisplayReject:
		ss.slots.settle(m.SlotID, slotResult{rejected: true, value: m.Error})
	case *protocol.ClientHello:
		for _, cp := range m.Capabilities {
			if cp == protocol.CapResume {
				ss.stream.allowResume()
			}
		}
		if m.Egress != nil {
			ss.egressFrame(c, *m.Egress)
		}
	case *protocol.EgressSet:
		ss.egressFrame(c, m.Rules)
	}
}

// ownerKind is what the logs say of a session's owner: "key", "sub:NAME",
// or "token" (a token's hash identifies it to the kit, not to a reader of
// logs).
func ownerKind(who string) string {
	if strings.HasPrefix(who, "token:") {
		return "token"
	}
	return who
}
