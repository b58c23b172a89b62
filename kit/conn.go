package kit

import (
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

const (
	// outboundQueue is how many frames wait for one connection's writer.
	// A full queue blocks the sender (backpressure); nothing is dropped.
	outboundQueue = 32
	// writeWait bounds one frame's write: a client that stops reading is
	// dropped after it.
	writeWait = 30 * time.Second
	// closeWait is how long a closing connection waits for the peer's
	// close frame before it cuts the connection.
	closeWait = 2 * time.Second
	// readBufferSize sizes a connection's read buffer; frames larger than
	// it are read in several pieces.
	readBufferSize = 1024
)

// conn is one WebSocket connection: the handler goroutine reads it and a
// writer goroutine writes every frame, in the order they were queued.
type conn struct {
	ws   *wsconn.Conn
	out  chan []byte
	done chan struct{} // closed once the connection is finished

	doneOnce   sync.Once
	goAway     chan struct{} // closed to ask the writer for a close frame
	goAwayOnce sync.Once
	writerDone chan struct{}
}

func newConn(ws *wsconn.Conn) *conn {
	return &conn{
		ws:         ws,
		out:        make(chan []byte, outboundQueue),
		done:       make(chan struct{}),
		goAway:     make(chan struct{}),
		writerDone: make(chan struct{}),
	}
}

// finish cuts the connection. It is safe to call more than once and from
// any goroutine.
func (c *conn) finish() {
	c.doneOnce.Do(func() {
		close(c.done)
		c.ws.Close()
	})
}

// close asks the writer to flush what is queued, send a close frame going
// away and cut the connection once the peer answers or closeWait passes.
func (c *conn) close() { c.goAwayOnce.Do(func() { close(c.goAway) }) }

// send queues a frame that is not part of the session's sequence (pong,
// hello). It gives up when the connection is finished.
func (c *conn) send(b []byte) bool {
	select {
	case c.out <- b:
		return true
	case <-c.done:
		return false
	}
}

// writeLoop writes queued frames and pings the peer every interval.
func (c *conn) writeLoop(interval time.Duration) {
	defer close(c.writerDone)
	ping := time.NewTicker(interval)
	defer ping.Stop()
	for {
		select {
		case b := <-c.out:
			if !c.write(b) {
				return
			}
		case <-ping.C:
			if err := c.ws.Ping(time.Now().Add(writeWait)); err != nil {
				c.finish()
				return
			}
		case <-c.goAway:
			c.flush()
			c.ws.WriteClose(wsconn.CloseGoingAway, "server shutting down", time.Now().Add(writeWait))
			t := time.NewTimer(closeWait)
			select {
			case <-c.done:
			case <-t.C:
				c.finish()
			}
			t.Stop()
			return
		case <-c.done:
			return
		}
	}
}

// flush writes whatever is queued now, without waiting for more.
func (c *conn) flush() {
	for {
		select {
		case b := <-c.out:
			if !c.write(b) {
				return
			}
		default:
			return
		}
	}
}

func (c *conn) write(b []byte) bool {
	c.ws.SetWriteDeadline(time.Now().Add(writeWait))
	if err := c.ws.WriteText(b); err != nil {
		c.finish()
		return false
	}
	return true
}
