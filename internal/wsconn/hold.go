package wsconn

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// maxHeld bounds what a held connection gathers before it writes anyway.
const maxHeld = 16 << 10

// heldPool recycles the buffers of held writes, so an idle connection
// holds none.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, maxHeld); return &b }}

// holdConn is a server connection whose writes can be held and then made
// in one system call: a burst of frames queued for one client costs one
// write, not one each.
type holdConn struct {
	net.Conn
	mu   sync.Mutex
	held *[]byte // nil unless holding
	err  error   // the first failed write; every later write fails
	// deadline is the write deadline set while holding, which the socket
	// gets when the held writes are made (zero: none pending).
	deadline time.Time
}

// SetWriteDeadline sets the socket's write deadline at once, unless writes
// are held: held writes touch no socket, so the last deadline set waits
// for the write that makes them. The WebSocket library sets a deadline
// before every frame it writes, and resetting the socket's timer takes a
// runtime lock each time: for a burst of small frames, about an eighth of
// the kit's time.
func (h *holdConn) SetWriteDeadline(t time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		return h.Conn.SetWriteDeadline(t)
	}
	h.deadline = t
	return nil
}

// writeLocked writes p to the socket, under the deadline set while
// holding if there is one.
func (h *holdConn) writeLocked(p []byte) (int, error) {
	if !h.deadline.IsZero() {
		if err := h.Conn.SetWriteDeadline(h.deadline); err != nil {
			h.err = err
			return 0, err
		}
		h.deadline = time.Time{}
	}
	n, err := h.Conn.Write(p)
	h.err = err
	return n, err
}

func (h *holdConn) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0, h.err
	}
	if h.held == nil {
		return h.writeLocked(p)
	}
	if len(*h.held)+len(p) > maxHeld {
		if err := h.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxHeld {
			return h.writeLocked(p)
		}
	}
	*h.held = append(*h.held, p...)
	return len(p), nil
}

func (h *holdConn) hold() {
	h.mu.Lock()
	if h.held == nil {
		h.held = heldPool.Get().(*[]byte)
	}
	h.mu.Unlock()
}

// release writes what is held and stops holding.
func (h *holdConn) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		return h.err
	}
	err := h.flushLocked()
	*h.held = (*h.held)[:0]
	heldPool.Put(h.held)
	h.held = nil
	return err
}

func (h *holdConn) flushLocked() error {
	if h.err != nil {
		return h.err
	}
	if len(*h.held) > 0 {
		h.writeLocked(*h.held)
		*h.held = (*h.held)[:0]
	}
	return h.err
}

// SyscallConn gives WaitReadable the socket underneath.
func (h *holdConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := h.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("wsconn: not a socket")
	}
	return sc.SyscallConn()
}

// Hold makes the writes that follow gather in memory until Release (or
// until 16 KiB are held), so that a burst of frames costs one system call.
// A client connection does not hold. Errors of held writes are reported by
// Release and by every write after them.
func (c *Conn) Hold() {
	if c.hc != nil {
		c.hc.hold()
	}
}

// Release writes what Hold gathered and stops holding.
func (c *Conn) Release() error {
	if c.hc == nil {
		return nil
	}
	return c.hc.release()
}
