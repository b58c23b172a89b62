package wsconn

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
)

// minReadBuffer is the smallest read buffer the library reuses (it must
// hold a control frame).
const minReadBuffer = 257

// hijacker hands the WebSocket library a read buffer of a chosen size, and
// keeps it for WaitReadable.
type hijacker struct {
	http.ResponseWriter
	size int
	br   *bufio.Reader
	hc   *holdConn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("websocket: response does not implement http.Hijacker")
	}
	nc, brw, err := hj.Hijack()
	if err != nil || brw.Reader.Buffered() > 0 {
		return nc, brw, err // the library refuses bytes sent before the handshake
	}
	h.hc = &holdConn{Conn: nc}
	h.br = bufio.NewReaderSize(nc, h.size)
	h.size = h.br.Size()
	brw.Reader = h.br
	return h.hc, brw, nil
}

// WaitReadable blocks until the peer has sent a frame other than a pong,
// the read deadline passes or the connection fails, without reading the
// frame. An idle server connection then waits on a short stack, which the
// runtime shrinks, instead of deep inside a frame read: that keeps an idle
// connection small.
//
// Keepalive pongs, the only traffic of an idle connection, are taken from
// the read buffer here (and the pong handler called), since a frame read
// that meets one handles it and goes on waiting, deep, for a data frame.
// WaitReadable is called only between messages (after ReadMessage
// returned), where the buffer starts at a frame header. Any other frame,
// or a pong not yet wholly buffered, is left for ReadMessage.
//
// It returns at once on a client connection, and where the platform gives
// no way to wait like this.
func (c *Conn) WaitReadable() error {
	if c.br == nil {
		return nil
	}
	c.unshelve()
	for {
		if c.br.Buffered() == 0 {
			if err := waitReadable(c.ws.NetConn()); err != nil {
				return err
			}
			// Fill the buffer with what arrived, without blocking: the
			// socket is readable, so one read returns at once.
			if _, err := c.br.Peek(1); err != nil {
				return nil // ReadMessage meets the error
			}
		}
		if !c.takePong() {
			return nil
		}
	}
}

// Park takes the keepalive pongs at the front of the read buffer and,
// when nothing else is buffered and the socket is empty, calls register
// with the socket's descriptor (held open during the call) and reports
// what register returned. register makes some other goroutine start the
// reading again once the socket is readable: the caller's goroutine may
// then exit, so an idle connection holds none. Park reports false, having
// called no register, when a frame (or the start of one) is buffered, the
// socket has bytes or failed, or the platform gives no way to park: the
// caller then waits and reads as before (WaitReadable, ReadMessage).
//
// Like WaitReadable it is called only between messages.
//
// A parked connection's read buffer, empty, goes back to a pool until the
// next read: an idle connection holds none.
func (c *Conn) Park(register func(fd uintptr) bool) bool {
	if c.br == nil {
		return false
	}
	c.unshelve()
	for {
		if c.br.Buffered() > 0 {
			if c.takePong() {
				continue
			}
			return false
		}
		empty, parked := parkEmpty(c.ws.NetConn(), func(fd uintptr) bool {
			// Before register: once it returns true, another goroutine
			// may read at any moment.
			c.shelve()
			if register(fd) {
				return true
			}
			c.unshelve()
			return false
		})
		if parked || empty {
			return parked
		}
		// The socket holds bytes (or its end): take them without
		// blocking, for the pongs among them.
		if _, err := c.br.Peek(1); err != nil {
			return false // ReadMessage meets the error
		}
	}
}

// takePong removes one whole client pong frame (FIN, opcode 0xA, masked,
// at most 125 bytes of payload) from the front of the read buffer, and
// reports whether it did.
func (c *Conn) takePong() bool {
	if c.br.Buffered() < 2 {
		return false
	}
	h, err := c.br.Peek(2) // buffered: does not read
	if err != nil || h[0] != 0x8A || h[1]&0x80 == 0 || h[1]&0x7F > 125 {
		return false
	}
	n := 2 + 4 + int(h[1]&0x7F)
	if c.br.Buffered() < n {
		return false
	}
	c.br.Discard(n)
	if c.pong != nil {
		c.pong()
	}
	return true
}

// spareReaders holds the read buffers of parked connections: readers
// reading nothing, each with a buffer.
var spareReaders sync.Pool

// shelve gives the empty read buffer to spareReaders; the *bufio.Reader
// the library holds stays, empty, until unshelve fills it again.
func (c *Conn) shelve() {
	spare := new(bufio.Reader)
	*spare = *c.br
	spare.Reset(nil)
	*c.br = bufio.Reader{}
	c.shelved = true
	spareReaders.Put(spare)
}

// unshelve gives a shelved connection a read buffer of its size again,
// from spareReaders when one there fits.
func (c *Conn) unshelve() {
	if !c.shelved {
		return
	}
	c.shelved = false
	if spare, ok := spareReaders.Get().(*bufio.Reader); ok && spare.Size() == c.bufSize {
		spare.Reset(c.hc.Conn)
		*c.br = *spare
		return
	}
	*c.br = *bufio.NewReaderSize(c.hc.Conn, c.bufSize)
}
