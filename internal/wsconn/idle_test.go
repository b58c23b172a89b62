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
			time.Sleep(10 * time.Millisecond) // let the reader go idle between rounds
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
	url := serve(t, wsconn.UpgradeOptions{}, func(c *wsconn.Conn) {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
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
	time.Sleep(20 * time.Millisecond) // let the server wait
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
