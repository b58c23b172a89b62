package kit

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

const (
	// outboundQueue is how many frames wait for one connection's writer.
	// A full queue blocks the sender (backpressure); nothing is dropped.
	outboundQueue = 16
	// writeWait bounds one frame's write: a client that stops reading is
	// dropped after it.
	writeWait = 30 * time.Second
	// closeWait is how long a closing connection waits for the peer's
	// close frame before it cuts the connection.
	closeWait = 2 * time.Second
	// readBufferSize sizes a connection's read buffer, held for the
	// connection's life. It is small because clients send little: a frame
	// header is read through it, and a payload larger than it is read
	// straight into the message, so a bigger buffer saves few syscalls and
	// costs every idle connection.
	readBufferSize = 288
	// parkAfter is how long a reader that has just handled a frame waits
	// for the next one before it parks the connection. A connection that
	// has sent nothing since it opened (or since it last parked) parks at
	// once: idle connections still hold no goroutine.
	parkAfter = time.Second
)

// Frames with a meaning of their own in a connection's queue. Real frames
// are never empty.
var (
	pingFrame  = []byte{} // write a ping control frame
	closeFrame []byte     // nil: write a close frame and end
)

// conn is one WebSocket connection. A reader goroutine reads it while
// frames come, and parks it (park_linux.go) when it is idle; every write
// goes through its queue and is made by a writer goroutine that runs only
// while the queue holds frames, so that an idle connection costs no
// goroutine and no queue. There is never more than one writer, and it
// writes the frames in queue order.
type conn struct {
	ws   *wsconn.Conn
	srv  *Server
	wg   *sync.WaitGroup // the server's
	sess *session        // the session its reader serves, set before the reader starts
	done chan struct{}   // closed once the connection is finished

	qmu sync.Mutex
	q   *frameQueue // nil while empty: an idle connection holds none
	// room is made by a sender waiting for room in a full queue, and
	// closed by the writer when it takes a frame.
	room chan struct{}

	doneOnce sync.Once
	writing  atomic.Bool // a writer goroutine runs (or the connection failed)
	closing  atomic.Bool // the close frame is queued
	ended    atomic.Bool // finish has begun: it may not park any more

	// readBy is the read deadline in Unix nanoseconds: the ping loop
	// wakes a parked connection once it has passed.
	readBy atomic.Int64
	// lingerBy, while the reader waits for the next frame before parking
	// (Unix nanoseconds, 0 otherwise), ends that wait sooner than readBy.
	// Only the reader uses it (the pong handler runs on the reader).
	lingerBy int64
	// Under the parker's mu: the token and socket of a parked connection
	// (parkTok 0: not parked).
	parkTok uint64
	parkFD  int
}

func newConn(ws *wsconn.Conn, s *Server) *conn {
	return &conn{
		ws:   ws,
		srv:  s,
		wg:   &s.wg,
		done: make(chan struct{}),
	}
}

// frameQueue is a connection's queue of frames, a ring taken from
// queuePool when a frame comes and given back when the writer empties it.
type frameQueue struct {
	frames  [outboundQueue][]byte
	head, n int
}

var queuePool = sync.Pool{New: func() any { return new(frameQueue) }}

// tryPush queues b unless the queue is full.
func (c *conn) tryPush(b []byte) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.pushLocked(b)
}

// pushLocked is tryPush with c.qmu held.
func (c *conn) pushLocked(b []byte) bool {
	if c.q == nil {
		c.q = queuePool.Get().(*frameQueue)
	}
	q := c.q
	if q.n == outboundQueue {
		return false
	}
	q.frames[(q.head+q.n)%outboundQueue] = b
	q.n++
	return true
}

// pop takes the next frame; the queue goes back to the pool once empty.
func (c *conn) pop() ([]byte, bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	q := c.q
	if q == nil {
		return nil, false
	}
	if q.n == 0 {
		c.q = nil
		queuePool.Put(q)
		return nil, false
	}
	b := q.frames[q.head]
	q.frames[q.head] = nil
	q.head = (q.head + 1) % outboundQueue
	q.n--
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
	return b, true
}

// queued reports whether a frame waits in the queue.
func (c *conn) queued() bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.q != nil && c.q.n > 0
}

// finish cuts the connection. It is safe to call more than once and from
// any goroutine.
func (c *conn) finish() {
	c.doneOnce.Do(func() {
		close(c.done)
		// A parked reader wakes to run the teardown, and the socket
		// leaves the epoll set before it closes: its number is reused.
		c.ended.Store(true)
		if p := c.srv.parker.Load(); p != nil {
			p.wake(c)
		}
		c.ws.Close()
	})
}

// push queues a frame and starts a writer for it.
func (c *conn) push(ctx context.Context, b []byte) error {
	err := c.enqueue(ctx, b)
	c.kick()
	return err
}

// enqueue queues a frame, blocking while the queue is full. It returns nil
// once the frame is queued or the connection is finished (the frame is
// then lost with it), and ctx's cause if ctx ends first. The caller then
// kicks the writer.
func (c *conn) enqueue(ctx context.Context, b []byte) error {
	for {
		// The room channel is taken under the same lock as the full
		// queue is seen: the writer's next pop closes it.
		c.qmu.Lock()
		if c.pushLocked(b) {
			c.qmu.Unlock()
			return nil
		}
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.qmu.Unlock()
		c.kick() // a full queue needs a writer while we wait
		select {
		case <-room:
		case <-c.done:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// send queues a frame that is not part of the session's sequence (pong,
// hello). It reports false when the connection is finished.
func (c *conn) send(b []byte) bool {
	c.push(context.Background(), b)
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// sendNow is send, writing on the caller's goroutine when no writer runs
// (writeNow).
func (c *conn) sendNow(b []byte) bool {
	c.enqueue(context.Background(), b)
	c.writeNow()
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// ping queues a ping unless the queue is full (a busy connection needs
// none).
func (c *conn) ping() {
	if c.tryPush(pingFrame) {
		c.kick()
	}
}

// close queues a close frame going away after what is queued; the
// connection is cut once the peer answers or closeWait passes.
func (c *conn) close() {
	if c.closing.CompareAndSwap(false, true) {
		c.push(context.Background(), closeFrame)
	}
}

// kick starts a writer unless one runs.
func (c *conn) kick() {
	if c.writing.CompareAndSwap(false, true) {
		c.wg.Add(1)
		go c.writeLoop()
	}
}

// writeLoop writes queued frames until the queue is empty. The frames of
// a burst are held and written together when the queue runs dry.
func (c *conn) writeLoop() { c.writeFrames(nil, false, -1) }

// writeNow makes the writes queued so far on the caller's goroutine when
// no writer runs, instead of starting one: a lone frame (a pong, a
// prompt's complete) then costs no goroutine and no wake-up of another
// thread. It writes at most max frames so, and never a close frame (whose
// write waits for the peer's answer, which the caller may be the one to
// read): what is left goes to a writer goroutine. A running writer makes
// the writes otherwise.
func (c *conn) writeNow() {
	if c.writing.CompareAndSwap(false, true) {
		c.wg.Add(1)
		c.writeFrames(nil, false, outboundQueue)
	}
}

// writeFrames writes b first if has, then the queued frames until the
// queue is empty. With max >= 0 it is writeNow's: after max frames, or
// before a close frame, it hands the rest to a writer goroutine.
func (c *conn) writeFrames(b []byte, has bool, max int) {
	defer c.wg.Done()
	for n := 0; ; n++ {
		if !has {
			b, has = c.pop()
		}
		if has {
			if max >= 0 && (n >= max || b == nil) {
				c.wg.Add(1)
				go c.writeFrames(b, true, -1)
				return
			}
			has = false
			c.ws.Hold()
			if !c.write(b) {
				return // writing stays set: no writer after a failure
			}
			continue
		}
		if err := c.ws.Release(); err != nil {
			c.finish()
			return
		}
		c.writing.Store(false)
		// A frame queued between the check and the store would find
		// writing set and start no writer: look again.
		if !c.queued() || !c.writing.CompareAndSwap(false, true) {
			return
		}
	}
}

// setReadDeadline sets the read deadline and notes it for the ping loop.
// While the reader lingers, the socket's deadline is the linger's end if
// that comes first.
func (c *conn) setReadDeadline(t time.Time) {
	c.readBy.Store(t.UnixNano())
	if c.lingerBy != 0 && c.lingerBy < t.UnixNano() {
		t = time.Unix(0, c.lingerBy)
	}
	c.ws.SetReadDeadline(t)
}

// linger waits, for at most the server's parkAfter, for the client's next
// frame (pongs are taken on the way), and reports whether one came: the
// runtime's own poller wakes the reader then, sooner and with less work
// than the parker's wake-up and a fresh reader. An error other than the
// linger's end is left for the frame read to meet.
func (c *conn) linger() bool {
	c.lingerBy = time.Now().Add(c.srv.parkAfter).UnixNano()
	c.setReadDeadline(time.Unix(0, c.readBy.Load()))
	err := c.ws.WaitReadable()
	c.lingerBy = 0
	c.setReadDeadline(time.Unix(0, c.readBy.Load()))
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func (c *conn) write(b []byte) bool {
	deadline := time.Now().Add(writeWait)
	var err error
	switch {
	case b == nil:
		c.ws.WriteClose(wsconn.CloseGoingAway, "server shutting down", deadline)
		c.ws.Release() // the close frame and what precedes it leave now
		t := time.NewTimer(closeWait)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		c.finish()
		return false
	case len(b) == 0:
		err = c.ws.Ping(deadline)
	default:
		c.ws.SetWriteDeadline(deadline)
		err = c.ws.WriteText(b)
	}
	if err != nil {
		c.finish()
		return false
	}
	return true
}
