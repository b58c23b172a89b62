package wsconn

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// deadlineCounter counts the write deadlines set on a real socket.
type deadlineCounter struct {
	net.Conn
	set int
}

func (d *deadlineCounter) SetWriteDeadline(t time.Time) error {
	d.set++
	return d.Conn.SetWriteDeadline(t)
}

// socketPair is both ends of a loopback TCP connection.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var b net.Conn
	select {
	case b = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted within 10s")
	}
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestHeldWritesTakeTheLastDeadline: while writes are held, the deadlines
// set before each (as the WebSocket library sets one a frame) do not reach
// the socket; the last one governs the write that makes them.
func TestHeldWritesTakeTheLastDeadline(t *testing.T) {
	a, b := socketPair(t)
	dc := &deadlineCounter{Conn: a}
	h := &holdConn{Conn: dc}
	h.hold()
	for range 100 {
		if err := h.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Write([]byte("frame\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	if dc.set != 1 {
		t.Errorf("100 held writes set the socket's write deadline %d times, want once, for the write that made them", dc.set)
	}
	b.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 600)
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatalf("the held writes did not arrive: %v", err)
	}

	// A deadline that has passed, set last while holding, fails the write
	// that makes the held writes, and nothing is sent.
	h.hold()
	h.SetWriteDeadline(time.Now().Add(10 * time.Second))
	h.Write([]byte("late\n"))
	h.SetWriteDeadline(time.Now().Add(-time.Second))
	if err := h.release(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("release under a passed deadline = %v, want %v", err, os.ErrDeadlineExceeded)
	}
	b.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := b.Read(got); n > 0 {
		t.Errorf("%d bytes sent under a passed deadline: %q", n, got[:n])
	}

	// Not holding, a deadline reaches the socket at once.
	h2 := &holdConn{Conn: &deadlineCounter{Conn: b}}
	h2.SetWriteDeadline(time.Now().Add(time.Second))
	if n := h2.Conn.(*deadlineCounter).set; n != 1 {
		t.Errorf("a deadline set while not holding reached the socket %d times, want 1", n)
	}
}
