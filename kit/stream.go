package kit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// stream is a session's numbered frame stream: it numbers every frame a
// session sends, queues it on the attached connection, keeps what a
// resuming client may ask for again, and moves the stream from a dropped
// connection to the one that resumes it.
type stream struct {
	ss *session

	// mu orders the numbered frames: a frame's seq and its place in the
	// connection's queue are decided together. conn and canResume change
	// under mu and may be read without it.
	mu         sync.Mutex
	seq        uint64
	lastSeq    atomic.Uint64        // seq, readable without mu
	conn       atomic.Pointer[conn] // nil while detached
	canResume  atomic.Bool          // the client announced "resume"
	replay     replay
	graceGen   int
	graceTimer *time.Timer
	pauseTimer *time.Timer // armed while detached (pause.go)
}

// attach makes c the session's connection and greets the client.
func (st *stream) attach(c *conn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.conn.Store(c)
	c.send(st.hello(false))
	srv := st.ss.srv
	if srv.drain.draining.Load() {
		b, _ := protocol.Encode(&protocol.Draining{Deadline: srv.drain.until.Load(), Message: drainMessage})
		c.send(b)
	}
}

func (st *stream) hello(resumed bool) []byte { return st.helloAs(resumed, false) }

// helloRestarted is the hello of a resume, restarted saying whether the
// box restarted since the client last saw the session.
func (st *stream) helloRestarted(restarted bool) []byte { return st.helloAs(true, restarted) }

func (st *stream) helloAs(resumed, restarted bool) []byte {
	srv := st.ss.srv
	h := &protocol.ServerHello{
		ProtocolVersion: protocol.Version,
		SessionID:       st.ss.id,
		Capabilities:    srv.caps,
		Name:            srv.man.Name,
		Version:         srv.man.Version,
		Resumed:         resumed,
		Restarted:       restarted,
		Egress:          st.ss.egressView(),
	}
	if resumed {
		h.LastSeq = st.seq
	}
	b, _ := protocol.Encode(h)
	return b
}

// allowResume records that the client announced the resume capability.
func (st *stream) allowResume() {
	st.mu.Lock()
	st.canResume.Store(true)
	st.mu.Unlock()
	st.ss.startPersisting()
}

func (st *stream) resumable() bool { return st.canResume.Load() }

// resume reattaches a dropped session to c and replays the frames after
// last. It fails when the session cannot resume or no longer holds them.
func (st *stream) resume(c *conn, last uint64) bool {
	// Cut the old connection first: a prompt blocked sending to it holds
	// mu until its frame is queued or the connection is finished.
	if old := st.conn.Load(); old != nil {
		old.finish()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ss.ctx.Err() != nil || !st.canResume.Load() {
		return false
	}
	frames, ok := st.replay.since(last, st.seq)
	restarted := st.ss.restored()
	if !ok && restarted {
		// Frames from before the restart are gone: the client is told.
		frames, ok = nil, true
	}
	if !ok {
		return false
	}
	old := st.conn.Swap(c)
	st.graceGen++
	st.stopGraceLocked()
	c.send(st.helloRestarted(restarted))
	for _, f := range frames {
		if !c.send(f) {
			break
		}
	}
	if old != nil {
		old.finish()
	}
	return true
}

// connGone detaches c. A resumable session whose client vanished without
// a close frame waits for a resume; any other session ends.
func (st *stream) connGone(c *conn, clean bool) {
	ss, srv := st.ss, st.ss.srv
	st.mu.Lock()
	if st.conn.Load() != c {
		st.mu.Unlock()
		return // replaced by a resume
	}
	st.conn.Store(nil)
	wait := st.canResume.Load() && !clean && ss.ctx.Err() == nil
	if wait {
		st.awaitResumeLocked(srv.resumeGrace)
		ss.logger().Debug("connection dropped; waiting for a resume", "grace", srv.resumeGrace)
	}
	st.mu.Unlock()
	if !wait && srv.ctx.Err() == nil {
		ss.end(errClosed)
	}
	// The box is shutting down: Close ends the session, with its own
	// cause (a persistent session is kept, persist.go).
}

// awaitResumeLocked keeps the detached session for grace, then ends it
// unless a client resumed it; it pauses it meanwhile (pause.go). st.mu
// is held.
func (st *stream) awaitResumeLocked(grace time.Duration) {
	ss, srv := st.ss, st.ss.srv
	st.graceGen++
	gen := st.graceGen
	srv.wg.Add(1)
	st.graceTimer = time.AfterFunc(max(grace, 0), func() {
		defer srv.wg.Done()
		st.mu.Lock()
		expired := st.conn.Load() == nil && st.graceGen == gen
		if expired {
			st.graceTimer = nil
		}
		st.mu.Unlock()
		if expired {
			ss.logger().Debug("resume grace expired")
			ss.end(errClosed)
		}
	})
	st.armPauseLocked(gen)
}

// detach leaves a session no connection has held (restored, forked)
// waiting for its client to attach with ?resume=ID&last_seq=0.
func (st *stream) detach() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.canResume.Store(true)
	if st.ss.ctx.Err() == nil {
		st.awaitResumeLocked(st.ss.srv.resumeGrace)
	}
}

func (st *stream) stopGraceLocked() {
	if st.graceTimer != nil && st.graceTimer.Stop() {
		st.ss.srv.wg.Done()
	}
	st.graceTimer = nil
	st.stopPauseLocked()
}

// end stops the resume grace timer and empties the replay buffer: the
// session has ended. The connection is left to the caller (goingAway,
// kill) or to its reader.
func (st *stream) end() {
	st.mu.Lock()
	st.stopGraceLocked()
	st.replay.reset()
	st.mu.Unlock()
}

// goingAway closes the session's connection with a close frame.
func (st *stream) goingAway() {
	st.mu.Lock()
	c := st.conn.Load()
	st.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// kill cuts the session's connection at once.
func (st *stream) kill() {
	st.mu.Lock()
	c := st.conn.Load()
	st.mu.Unlock()
	if c != nil {
		c.finish()
	}
}

// sendUnnumbered queues a frame outside the sequence (draining) on the
// attached connection, if there is one.
func (st *stream) sendUnnumbered(b []byte) {
	st.mu.Lock()
	if c := st.conn.Load(); c != nil {
		c.send(b)
	}
	st.mu.Unlock()
}

// sendSeq numbers a frame and queues it. body is a JSON object without its
// closing brace; sendSeq appends the seq field and the brace. It blocks
// while the connection's queue is full, until ctx ends; while the session
// is detached the frame goes to the replay buffer only.
func (st *stream) sendSeq(ctx context.Context, body []byte) error {
	c, err := st.queueSeq(ctx, body)
	if c != nil {
		c.kick()
	}
	return err
}

// sendSeqNow is sendSeq for the last frame of a turn (complete, error):
// the caller, which has nothing else to do, writes it when no writer runs
// (conn.writeNow).
func (st *stream) sendSeqNow(ctx context.Context, body []byte) error {
	c, err := st.queueSeq(ctx, body)
	if c != nil {
		c.writeNow()
	}
	return err
}

func (st *stream) queueSeq(ctx context.Context, body []byte) (*conn, error) {
	ss := st.ss
	st.mu.Lock()
	defer st.mu.Unlock()
	seq := st.seq + 1
	body = append(body, `,"seq":`...)
	body = strconv.AppendUint(body, seq, 10)
	body = append(body, '}')
	c := st.conn.Load()
	// The frame is counted before it can reach the client: a client that
	// saw it and resumes at once must find it sent.
	st.lastSeq.Store(seq)
	if c != nil {
		if err := c.enqueue(ctx, body); err != nil {
			st.lastSeq.Store(st.seq)
			return c, err
		}
	}
	st.seq = seq
	ss.framesSent.Add(1)
	ss.bytesSent.Add(int64(len(body)))
	ss.lastActive.Store(time.Now().UnixNano())
	if o := ss.srv.obs; o != nil {
		o.FramesSent.Add(1)
		o.BytesSent.Add(int64(len(body)))
	}
	if ss.observed() {
		ss.obs.publish(body)
	}
	if st.canResume.Load() {
		st.replay.push(seq, body)
		if r := ss.persist.reserved; r != 0 && seq >= r {
			st.reserveLocked() // persist.go
		}
	}
	return c, nil
}

// sendMessage encodes a numbered server message and queues it.
func (st *stream) sendMessage(ctx context.Context, m protocol.ServerMessage) error {
	b, err := protocol.Encode(m)
	if err != nil {
		return err
	}
	return st.sendSeq(ctx, b[:len(b)-1])
}

func (st *stream) sendError(ctx context.Context, id, code, msg string) {
	st.sendErrorVia(ctx, id, code, msg, st.sendSeq)
}

// sendErrorNow is sendError for the runner of the prompt that failed:
// it writes the frame itself when no writer runs (sendSeqNow).
func (st *stream) sendErrorNow(ctx context.Context, id, code, msg string) {
	st.sendErrorVia(ctx, id, code, msg, st.sendSeqNow)
}

func (st *stream) sendErrorVia(ctx context.Context, id, code, msg string, send func(context.Context, []byte) error) {
	b, err := protocol.Encode(&protocol.Error{ID: id, Error: protocol.ErrorBody{Code: code, Message: msg}})
	if err == nil {
		err = send(ctx, b[:len(b)-1])
	}
	if err != nil {
		st.ss.logger().Debug("error frame not sent", "id", id, "err", err)
	}
}
