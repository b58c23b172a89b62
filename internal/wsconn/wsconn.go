// Package wsconn is the one place that imports the WebSocket library. The
// kit and the client use only this seam, so the library can be swapped in
// one change (gorilla/websocket has had no release since v1.5.3).
//
// A Conn is not safe for concurrent writers or concurrent readers: callers
// keep one reader goroutine and one writer goroutine per connection, as the
// house style requires. Close and WriteControl-based helpers (WriteClose,
// Ping) may be called from any goroutine.
package wsconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Close codes used by Glovebox.
const (
	CloseNormal        = websocket.CloseNormalClosure
	CloseGoingAway     = websocket.CloseGoingAway
	CloseProtocolError = websocket.CloseProtocolError
	CloseTooBig        = websocket.CloseMessageTooBig
	ClosePolicy        = websocket.ClosePolicyViolation
	CloseInternal      = websocket.CloseInternalServerErr
	CloseTryAgainLater = websocket.CloseTryAgainLater
)

// Conn is one WebSocket connection.
type Conn struct {
	ws *websocket.Conn
	// br is a server connection's read buffer, which Upgrade owns so that
	// WaitReadable can tell whether it holds bytes.
	br *bufio.Reader
	hc *holdConn // a server connection's socket, whose writes can be held
	// bufSize is br's size; shelved says br has lent its buffer to
	// spareReaders while the connection is parked (see Park).
	bufSize int
	shelved bool
	// pong is the pong handler, which WaitReadable calls for the pongs it
	// takes from the read buffer itself.
	pong func()
}

// UpgradeOptions configure Upgrade.
type UpgradeOptions struct {
	// Subprotocols the server may select, in preference order. The server
	// picks the first one the client also offered.
	Subprotocols []string
	// CheckOrigin decides whether to accept a browser's Origin. Nil
	// accepts every origin: Glovebox routes are bearer-authenticated and
	// use no cookies, so a cross-origin page gains nothing without the key.
	CheckOrigin func(r *http.Request) bool
	// ResponseHeader is sent with the 101 response.
	ResponseHeader http.Header
	// ReadBufferSize and WriteBufferSize size the I/O buffers; 0 means
	// 4096. Buffers are pooled between writes.
	ReadBufferSize, WriteBufferSize int
}

// writePool shares write buffers between idle connections, so an idle
// connection holds none (see BENCHMARKS.md, memory per idle connection).
var writePool websocket.BufferPool = &sync.Pool{}

// Upgrade upgrades an HTTP request. On failure it has already written an
// HTTP error response; the caller must not write another.
func Upgrade(w http.ResponseWriter, r *http.Request, opts UpgradeOptions) (*Conn, error) {
	check := opts.CheckOrigin
	if check == nil {
		check = func(*http.Request) bool { return true }
	}
	// The library reuses the hijacked read buffer when its own size is
	// unset: hijacking hands it one of ours, of the size asked for.
	hw := &hijacker{ResponseWriter: w, size: max(opts.ReadBufferSize, minReadBuffer)}
	if opts.ReadBufferSize == 0 {
		hw.size = 4096
	}
	u := websocket.Upgrader{
		WriteBufferSize: opts.WriteBufferSize,
		WriteBufferPool: writePool,
		Subprotocols:    opts.Subprotocols,
		CheckOrigin:     check,
	}
	ws, err := u.Upgrade(hw, r, opts.ResponseHeader)
	if err != nil {
		return nil, err
	}
	return &Conn{ws: ws, br: hw.br, hc: hw.hc, bufSize: hw.size}, nil
}

// DialOptions configure Dial.
type DialOptions struct {
	Header       http.Header
	Subprotocols []string
	// HandshakeTimeout bounds the opening handshake (default 30s).
	HandshakeTimeout time.Duration
}

// Dial opens a client connection. The returned response is non-nil when
// the server answered the handshake, also on failure (e.g. 401).
func Dial(ctx context.Context, url string, opts DialOptions) (*Conn, *http.Response, error) {
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: opts.HandshakeTimeout,
		Subprotocols:     opts.Subprotocols,
		WriteBufferPool:  writePool,
	}
	if d.HandshakeTimeout == 0 {
		d.HandshakeTimeout = 30 * time.Second
	}
	ws, resp, err := d.DialContext(ctx, url, opts.Header)
	if err != nil {
		return nil, resp, err
	}
	return &Conn{ws: ws}, resp, nil
}

// SetReadLimit caps the size of one incoming message. A larger message
// fails the read and closes the connection with CloseTooBig.
func (c *Conn) SetReadLimit(n int64) { c.ws.SetReadLimit(n) }

// SetReadDeadline sets the deadline for the next read.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline for the next write.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }

// SetPongHandler sets the function called for each pong control frame.
// It runs on the reader goroutine.
func (c *Conn) SetPongHandler(h func()) {
	c.pong = h
	c.ws.SetPongHandler(func(string) error { h(); return nil })
}

// ReadMessage reads the next data message, text or binary.
func (c *Conn) ReadMessage() ([]byte, error) {
	c.unshelve()
	_, data, err := c.ws.ReadMessage()
	return data, err
}

// NextReader returns a reader of the next data message, text or binary.
// The message is not buffered: its bytes are read from the connection as
// the reader is read, and the read limit is checked against each frame's
// header before its payload is read. The reader is valid until the next
// call.
func (c *Conn) NextReader() (io.Reader, error) {
	c.unshelve()
	_, r, err := c.ws.NextReader()
	return r, err
}

// NextReaderSize is NextReader that also tells the message's size when
// it is known before reading it: a server connection whose read buffer
// holds the header of a text or binary frame that is its message's only
// one. It is -1 otherwise (a fragmented message, a header not yet
// received, a client connection). The size is the header's word, checked
// against the read limit; its reader still ends where the message does.
// Called only after the previous message was read to its end.
func (c *Conn) NextReaderSize() (r io.Reader, size int64, err error) {
	c.unshelve()
	size = c.bufferedMessageSize()
	_, r, err = c.ws.NextReader()
	return r, size, err
}

// bufferedMessageSize reads, without consuming or waiting for anything,
// the payload length of the frame at the front of the read buffer when it
// is a whole text or binary message (FIN set); -1 otherwise.
func (c *Conn) bufferedMessageSize() int64 {
	if c.br == nil || c.br.Buffered() < 2 {
		return -1
	}
	h, _ := c.br.Peek(2) // buffered: does not read
	if op := h[0] & 0x0F; h[0]&0x80 == 0 || (op != 0x1 && op != 0x2) {
		return -1
	}
	switch n := h[1] & 0x7F; n {
	case 126:
		if c.br.Buffered() < 4 {
			return -1
		}
		h, _ = c.br.Peek(4)
		return int64(binary.BigEndian.Uint16(h[2:]))
	case 127:
		if c.br.Buffered() < 10 {
			return -1
		}
		h, _ = c.br.Peek(10)
		return int64(binary.BigEndian.Uint64(h[2:]) & (1<<63 - 1))
	default:
		return int64(n)
	}
}

// ReadFrame reads the next data message and says whether it is binary.
func (c *Conn) ReadFrame() (binary bool, data []byte, err error) {
	c.unshelve()
	typ, data, err := c.ws.ReadMessage()
	return typ == websocket.BinaryMessage, data, err
}

// WriteBinary writes one binary message.
func (c *Conn) WriteBinary(data []byte) error {
	return c.ws.WriteMessage(websocket.BinaryMessage, data)
}

// WriteText writes one text message.
func (c *Conn) WriteText(data []byte) error { return c.ws.WriteMessage(websocket.TextMessage, data) }

// Ping sends a ping control frame. Safe from any goroutine.
func (c *Conn) Ping(deadline time.Time) error {
	return c.ws.WriteControl(websocket.PingMessage, nil, deadline)
}

// Pong sends a pong control frame. Safe from any goroutine. (The library
// answers pings itself; this is for tests of keepalive.)
func (c *Conn) Pong(deadline time.Time, data []byte) error {
	return c.ws.WriteControl(websocket.PongMessage, data, deadline)
}

// WriteClose sends a close frame. Safe from any goroutine.
func (c *Conn) WriteClose(code int, reason string, deadline time.Time) error {
	if len(reason) > 120 {
		reason = reason[:120]
	}
	return c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
}

// Subprotocol is the subprotocol the server selected.
func (c *Conn) Subprotocol() string { return c.ws.Subprotocol() }

// Close closes the underlying network connection without a close frame.
func (c *Conn) Close() error { return c.ws.Close() }

// CloseCode returns the close code of a read error caused by a close frame,
// or 0 for any other error.
func CloseCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}

// IsClosed reports whether err means the peer closed the connection
// normally or went away.
func IsClosed(err error) bool {
	return websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived)
}

// IsUpgrade reports whether r asks for a WebSocket upgrade.
func IsUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// RequestedSubprotocols lists the subprotocols the client offered.
func RequestedSubprotocols(r *http.Request) []string { return websocket.Subprotocols(r) }
