package wsconn_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// TestNextReaderSize sends messages of one frame, with each length
// encoding of the header, and a message in fragments: the server learns
// the size of each of the first from its header, not of the last, and
// reads every message whole.
func TestNextReaderSize(t *testing.T) {
	type read struct {
		size int64
		data []byte
	}
	got := make(chan read, 8)
	reader := func(c *wsconn.Conn) {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			if err := c.WaitReadable(); err != nil {
				return
			}
			r, size, err := c.NextReaderSize()
			if err != nil {
				return
			}
			b, err := io.ReadAll(r)
			if err != nil {
				return
			}
			got <- read{size, b}
		}
	}
	ctx := testkit.Context(t, "the WebSocket handshake")
	whole, _, err := (&websocket.Dialer{WriteBufferSize: 128 << 10}).DialContext(ctx, serve(t, wsconn.UpgradeOptions{}, reader), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	for _, n := range []int{0, 125, 126, 65535, 65536, 100000} {
		msg := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		if err := whole.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if r.size != int64(n) || !bytes.Equal(r.data, msg) {
				t.Errorf("a message of %d bytes in one frame: size %d, %d bytes read; want size %d and the bytes sent", n, r.size, len(r.data), n)
			}
		case <-time.After(testkit.Timeout):
			t.Fatalf("a message of %d bytes was not read", n)
		}
	}
	whole.Close()
	fragments, _, err := (&websocket.Dialer{WriteBufferSize: 1024}).DialContext(ctx, serve(t, wsconn.UpgradeOptions{}, reader), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	defer fragments.Close()
	msg := bytes.Repeat([]byte("f"), 5000)
	if err := fragments.WriteMessage(websocket.TextMessage, msg); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.size != -1 || !bytes.Equal(r.data, msg) {
			t.Errorf("a message of 5000 bytes in fragments: size %d, %d bytes read; want size -1 and the bytes sent", r.size, len(r.data))
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("a fragmented message was not read")
	}
}
