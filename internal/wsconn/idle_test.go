package wsconn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// serve upgrades one connection and hands it to fn.
func serve(t *testing.T, opts wsconn.UpgradeOptions, fn func(*wsconn.Conn)) string {
	t.Helper()
	done := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := wsconn.Upgrade(w, r, opts)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer c.Close()
		fn(c)
		close(done)
	}))
	t.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the server's handler did not return within 30s")
		}
		ts.Close()
	})
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

// TestWaitReadableLosesNothing sends bursts of frames of every size around
// the read buffer's in single writes, so that frames end up split between
// the read buffer and the socket: WaitReadable must never wait while a
// frame is half read, whichever side holds it.
func TestWaitReadableLosesNothing(t *testing.T) {
	sizes := []int{0, 1, 100, 250, 256, 257, 287, 288, 289, 500, 1000, 4096, 70000}
	var want []string
	for round := range 3 {
		for _, n := range sizes {
			want = append(want, fmt.Sprintf("%d:%d:%s", round, n, strings.Repeat("x", n)))
		}
	}
	got := make(chan []string, 1)
	read := make(chan int, len(want)) // how many frames the server has read, after each
	url := serve(t, wsconn.UpgradeOptions{ReadBufferSize: 288}, func(c *wsconn.Conn) {
		var seen []string
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for len(seen) < len(want) {
			if err := c.WaitReadable(); err != nil {
				t.Errorf("WaitReadable after %d frames: %v", len(seen), err)
				break
			}
			data, err := c.ReadMessage()
			if err != nil {
				t.Errorf("ReadMessage after %d frames: %v", len(seen), err)
				break
			}
			seen = append(seen, string(data))
			read <- len(seen)
		}
		got <- seen
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, m := range want {
		if err := c.WriteText([]byte(m)); err != nil {
			t.Fatal(err)
		}
		if i%len(sizes) == len(sizes)-1 {
			// Let the reader go idle between rounds: wait until it has
			// read the round.
			for testkit.Recv(t, read, fmt.Sprintf("the server to read the first %d frames", i+1)) < i+1 {
			}
		}
	}
	var seen []string
	select {
	case seen = <-got:
	case <-ctx.Done():
		t.Fatal("the server did not read every frame within 30s")
	}
	if len(seen) != len(want) {
		t.Fatalf("server read %d frames, want %d", len(seen), len(want))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("frame %d: got %d bytes, want %q...", i, len(seen[i]), want[i][:min(len(want[i]), 20)])
		}
	}
}

// TestWaitReadableHonoursTheReadDeadline: an idle wait ends with a timeout
// when the deadline passes, as a frame read would.
func TestWaitReadableHonoursTheReadDeadline(t *testing.T) {
	errc := make(chan error, 1)
	url := serve(t, wsconn.UpgradeOptions{}, func(c *wsconn.Conn) {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		errc <- c.WaitReadable()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("WaitReadable = %v, want a deadline error", err)
		}
	case <-ctx.Done():
		t.Fatal("WaitReadable did not return within 30s of a 50ms deadline")
	}
}

// TestWaitReadableSeesTheEnd: a peer that goes away wakes an idle wait, and
// the read that follows reports it.
func TestWaitReadableSeesTheEnd(t *testing.T) {
	errc := make(chan error, 1)
	waiting := make(chan struct{})
	url := serve(t, wsconn.UpgradeOptions{}, func(c *wsconn.Conn) {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		close(waiting)
		if err := c.WaitReadable(); err != nil {
			errc <- fmt.Errorf("WaitReadable: %w", err)
			return
		}
		_, err := c.ReadMessage()
		errc <- err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, waiting, "the server to start its wait") // most often it is in WaitReadable by the Close; either way the end must show
	c.Close()
	select {
	case err := <-errc:
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("read after the peer left = %v, want the connection's end", err)
		}
	case <-ctx.Done():
		t.Fatal("the server did not see the peer leave within 30s")
	}
}

// TestHeldWritesArriveInOrder: frames written while held reach the peer
// whole and in order once released, including frames larger than what a
// held connection gathers, and control frames written between them.
func TestHeldWritesArriveInOrder(t *testing.T) {
	var want []string
	for i, n := range []int{1, 10, 1000, 16 << 10, 20 << 10, 5, 70000, 3} {
		want = append(want, fmt.Sprintf("%d:%s", i, strings.Repeat("y", n)))
	}
	released := make(chan error, 1)
	url := serve(t, wsconn.UpgradeOptions{}, func(c *wsconn.Conn) {
		c.Hold()
		for i, m := range want {
			if err := c.WriteText([]byte(m)); err != nil {
				t.Errorf("held write %d: %v", i, err)
			}
			if i == 2 {
				c.Ping(time.Now().Add(10 * time.Second))
			}
		}
		released <- c.Release()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		c.ReadMessage() // until the client leaves
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range want {
		data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if string(data) != want[i] {
			t.Fatalf("frame %d: got %d bytes, want %d", i, len(data), len(want[i]))
		}
	}
	if err := <-released; err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestReleaseReportsAHeldWriteFailure: a write gathered while held that
// cannot be made is reported by Release, and every write after it fails.
func TestReleaseReportsAHeldWriteFailure(t *testing.T) {
	errs := make(chan error, 2)
	gone := make(chan struct{})
	url := serve(t, wsconn.UpgradeOptions{}, func(c *wsconn.Conn) {
		<-gone
		c.Hold()
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		for range 64 { // enough to meet the reset peer
			c.WriteText([]byte(strings.Repeat("z", 8<<10)))
		}
		errs <- c.Release()
		errs <- c.WriteText([]byte("after"))
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	close(gone)
	for _, what := range []string{"Release", "a write after the failure"} {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatalf("%s = nil, want the failed write's error", what)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not return within 30s", what)
		}
	}
}

// TestWaitReadableTakesPongs: keepalive pongs, alone or several in one
// segment, are answered from the wait (the handler runs for each) and do
// not end it; the data frame after them does, and is read whole.
func TestWaitReadableTakesPongs(t *testing.T) {
	type result struct {
		pongs int
		data  string
		err   error
	}
	got := make(chan result, 1)
	ponged := make(chan struct{}, 5)
	url := serve(t, wsconn.UpgradeOptions{}, func(c *wsconn.Conn) {
		pongs := 0
		c.SetPongHandler(func() { pongs++; ponged <- struct{}{} })
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := c.WaitReadable(); err != nil {
			got <- result{err: err}
			return
		}
		seen := pongs // every pong came before the data frame
		data, err := c.ReadMessage()
		got <- result{pongs: seen, data: string(data), err: err}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 5 {
		if err := c.Pong(time.Now().Add(10*time.Second), []byte(strings.Repeat("p", i*30))); err != nil {
			t.Fatal(err)
		}
		if i < 2 { // the first two alone: each taken before the next is sent; the rest in a burst
			testkit.Recv(t, ponged, fmt.Sprintf("pong %d to be taken", i+1))
		}
	}
	if err := c.WriteText([]byte("data")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || r.pongs != 5 || r.data != "data" {
			t.Fatalf("server saw %d pongs before the frame, then %q, %v; want 5 pongs, then \"data\"", r.pongs, r.data, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the server did not read the frame within 30s")
	}
}
