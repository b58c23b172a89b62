package kit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// A sender that finds the queue full waits for room, and the writer always
// makes it: frames pushed as fast as they can be, far more than the queue
// holds, all arrive, in order, with no sender left waiting for a wakeup
// that never comes.
func TestQueueFullSenderAlwaysWakes(t *testing.T) {
	const n = 100000
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := &Server{}
	sent := make(chan error, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := wsconn.Upgrade(w, r, wsconn.UpgradeOptions{})
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		c := newConn(ws, srv)
		go func() {
			for i := range n {
				if err := c.push(ctx, []byte(strconv.Itoa(i))); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
	}))
	defer ts.Close()
	c, _, err := wsconn.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http"), wsconn.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range n {
		b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("after %d of %d frames: %v (a sender waits for room that was never made?)", i, n, err)
		}
		if string(b) != strconv.Itoa(i) {
			t.Fatalf("frame %d is %q", i, b)
		}
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatalf("push: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the sender did not return within 60s")
	}
	srv.wg.Wait()
}
