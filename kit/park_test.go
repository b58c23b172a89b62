//go:build linux

package kit

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// rawClient is a WebSocket client over a bare socket, so that a test
// controls every byte and where the bytes split.
type rawClient struct {
	net.Conn
	br *bufio.Reader
}

// dialParkable opens a session over a bare socket and reads its server hello.
func dialParkable(t *testing.T, b *box) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(b.url, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: box\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Protocol: %s\r\nAuthorization: Bearer %s\r\n\r\n", SubprotocolV1, b.key)
	rc := &rawClient{Conn: c, br: bufio.NewReader(c)}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if m := rc.message(t); !strings.Contains(m, `"type":"hello"`) {
		t.Fatalf("first frame %s, want the server hello", m)
	}
	return rc
}

// clientFrame is one masked client frame with FIN set.
func clientFrame(op byte, payload []byte) []byte {
	f := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		f = append(f, 0x80|byte(n))
	case n < 1<<16:
		f = append(f, 0x80|126, byte(n>>8), byte(n))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	mask := [4]byte{7, 1, 9, 3}
	f = append(f, mask[:]...)
	for i, b := range payload {
		f = append(f, b^mask[i%4])
	}
	return f
}

func pingMessage(ts int) []byte {
	return clientFrame(0x1, fmt.Appendf(nil, `{"type":%q,"ts":%d}`, protocol.TypePing, ts))
}

// frame reads one server frame (servers do not mask).
func (rc *rawClient) frame() (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(rc.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7F)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(rc.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(rc.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(rc.br, payload)
	return h[0] & 0x0F, payload, err
}

// message reads the next text frame, skipping the server's pings.
func (rc *rawClient) message(t *testing.T) string {
	t.Helper()
	for {
		op, p, err := rc.frame()
		if err != nil {
			t.Fatalf("reading a server frame: %v", err)
		}
		if op == 0x1 {
			return string(p)
		}
	}
}

func (rc *rawClient) write(t *testing.T, b []byte) {
	t.Helper()
	if _, err := rc.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// expectPong reads the pong message answering the ping message with ts.
func (rc *rawClient) expectPong(t *testing.T, ts int) {
	t.Helper()
	m := rc.message(t)
	if want := fmt.Sprintf(`"ts":%d`, ts); !strings.Contains(m, `"pong"`) || !strings.Contains(m, want) {
		t.Fatalf("got %s, want the pong with %s", m, want)
	}
}

func waitParked(t *testing.T, b *box, n int) {
	t.Helper()
	testkit.Until(t, fmt.Sprintf("%d connections parked", n), func() bool { return b.srv.parkedConns() == n })
}

// TestParkedConnectionReadsFrames sends to a parked connection many frames
// at once, keepalive pongs among them, and frames whose bytes arrive some
// while it is parked and the rest once it woke: every message is answered,
// in order, and the connection parks again after each burst.
func TestParkedConnectionReadsFrames(t *testing.T) {
	b := newBox(t, scripted(nil))
	rc := dialParkable(t, b)
	waitParked(t, b, 1)

	// A burst of 300 messages with a pong after each, in one write.
	var burst []byte
	for i := range 300 {
		burst = append(burst, pingMessage(i)...)
		burst = append(burst, clientFrame(0xA, nil)...)
	}
	rc.write(t, burst)
	for i := range 300 {
		rc.expectPong(t, i)
	}
	waitParked(t, b, 1)

	// A message split after its first bytes: the reader wakes to them and
	// waits for the rest in the frame read.
	f := pingMessage(1000)
	rc.write(t, f[:3])
	testkit.Until(t, "the reader woken by a partial frame", func() bool { return b.srv.parkedConns() == 0 })
	rc.write(t, f[3:])
	rc.expectPong(t, 1000)
	waitParked(t, b, 1)

	// Pongs alone wake the reader, which takes them and parks again; a
	// pong split across the wake-up is read as well.
	for range 20 {
		rc.write(t, clientFrame(0xA, []byte("keepalive")))
	}
	p := clientFrame(0xA, []byte("split"))
	rc.write(t, p[:4])
	testkit.Until(t, "the reader woken by a partial pong", func() bool { return b.srv.parkedConns() == 0 })
	rc.write(t, append(p[4:], pingMessage(1001)...))
	rc.expectPong(t, 1001)
	waitParked(t, b, 1)

	// A large message (its payload longer than the read buffer).
	big := clientFrame(0x1, fmt.Appendf(nil, `{"type":"ping","ts":1002,"pad":%q}`, strings.Repeat("x", 5000)))
	rc.write(t, big)
	rc.expectPong(t, 1002)
	waitParked(t, b, 1)
}

// TestReaderLingersAfterAFrame: a connection that has sent nothing parks
// at once; once its reader has handled a frame, it waits for the next in
// the runtime's poller for parkAfter, reads the frames that come
// meanwhile there (the parker wakes nothing), and parks once parkAfter
// passes without one.
func TestReaderLingersAfterAFrame(t *testing.T) {
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.parkAfter = time.Hour })
	rc := dialParkable(t, b)
	waitParked(t, b, 1)
	for i := range 10 {
		rc.write(t, pingMessage(i))
		rc.expectPong(t, i)
		testkit.Until(t, "the reader waiting in linger, unparked", func() bool {
			return lingering() == 1 && b.srv.parkedConns() == 0
		})
	}
}

// TestReaderParksAfterLingering: once parkAfter passes without a frame,
// the reader parks the connection, which answers when woken.
func TestReaderParksAfterLingering(t *testing.T) {
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.parkAfter = time.Millisecond })
	rc := dialParkable(t, b)
	waitParked(t, b, 1)
	for i := range 3 {
		rc.write(t, pingMessage(i))
		rc.expectPong(t, i)
		waitParked(t, b, 1)
	}
}

// lingering counts the goroutines waiting in conn.linger.
func lingering() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "kit.(*conn).linger(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestParkedSilentClientIsDropped: a client that answers no ping is
// dropped by its read deadline while its connection is parked.
func TestParkedSilentClientIsDropped(t *testing.T) {
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.PingInterval = 100 * time.Millisecond })
	rc := dialParkable(t, b)
	waitParked(t, b, 1)
	for {
		_, _, err := rc.frame()
		if err == nil {
			continue // the server's pings, unanswered
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the silent client was not dropped within a minute")
		}
		break // the server cut the connection
	}
	testkit.Until(t, "the dropped session to end", func() bool { return b.srv.sessionCount() == 0 })
	if n := b.srv.parkedConns(); n != 0 {
		t.Errorf("%d connections still parked after the drop", n)
	}
}

// TestServerEndsParkedConnectionOnce cuts a parked connection from many
// goroutines at once, while others wake it as the ping loop does: its
// teardown runs once (twice would take the server's WaitGroup below zero,
// which panics) and the session ends.
func TestServerEndsParkedConnectionOnce(t *testing.T) {
	b := newBox(t, scripted(nil))
	rc := dialParkable(t, b)
	waitParked(t, b, 1)
	b.srv.mu.Lock()
	var c *conn
	for k := range b.srv.conns {
		c = k
	}
	b.srv.mu.Unlock()
	p := b.srv.parker.Load()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(c.finish)
		wg.Go(func() { p.wake(c) })
	}
	wg.Wait()
	if _, err := io.ReadAll(rc.br); err != nil {
		t.Fatalf("reading to the end of the cut connection: %v", err)
	}
	testkit.Until(t, "the cut connection's session to end", func() bool { return b.srv.sessionCount() == 0 })
	b.srv.mu.Lock()
	left := len(b.srv.conns)
	b.srv.mu.Unlock()
	if left != 0 || b.srv.parkedConns() != 0 {
		t.Errorf("after the cut: %d connections registered, %d parked; want none", left, b.srv.parkedConns())
	}
	// The session's teardown must leave the box able to serve and park.
	rc2 := dialParkable(t, b)
	waitParked(t, b, 1)
	rc2.write(t, pingMessage(7))
	rc2.expectPong(t, 7)
}

// epollSets counts the process's open epoll descriptors.
func epollSets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("list open fds: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "eventpoll") {
			n++
		}
	}
	return n
}

// TestCloseWithThousandsParked closes a box holding thousands of parked
// connections whose clients never answer the close: each wakes, tears
// down, and Close leaves no goroutine (checked by newBox), no epoll set and
// no socket behind.
func TestCloseWithThousandsParked(t *testing.T) {
	const n = 2000
	b := newBox(t, scripted(nil))
	idle, sets := measure(t), epollSets(t)
	clients := make([]*rawClient, n)
	for i := range clients {
		clients[i] = dialParkable(t, b)
	}
	waitParked(t, b, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if b.srv.sessionCount() != 0 || b.srv.parkedConns() != 0 {
		t.Fatalf("after Close: %d sessions, %d parked; want none", b.srv.sessionCount(), b.srv.parkedConns())
	}
	for _, rc := range clients {
		rc.Close()
	}
	b.ts.CloseClientConnections()
	testkit.Until(t, "open fds back to their level before the connections", func() bool {
		return measure(t).fds <= idle.fds+leakTolerance
	})
	if got := epollSets(t); got != sets {
		t.Errorf("%d epoll sets open after Close, %d before the connections: the parker's was not closed", got, sets)
	}
}
