package wsconn

import (
	"bufio"
	"errors"
	"net"
	"net/http"
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
	h.br = bufio.NewReaderSize(nc, h.size)
	brw.Reader = h.br
	return nc, brw, nil
}

// WaitReadable blocks until the peer has sent something, the read deadline
// passes or the connection fails, without reading. An idle server
// connection then waits on a short stack, which the runtime shrinks,
// instead of deep inside a frame read: that keeps an idle connection
// small. It returns at once when its read buffer holds bytes, on a client
// connection, and where the platform gives no way to wait like this.
func (c *Conn) WaitReadable() error {
	if c.br == nil || c.br.Buffered() > 0 {
		return nil
	}
	return waitReadable(c.ws.NetConn())
}
