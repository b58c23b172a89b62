package wsconn

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A parked connection lends its empty read buffer to the pool, and gets
// one back, of its size, for the next read: every frame still arrives
// whole.
func TestParkLendsTheReadBuffer(t *testing.T) {
	sizes := []int{1, 287, 288, 289, 1000}
	type result struct {
		lent int // parks that left the connection without a buffer
		seen []string
		err  error
	}
	got := make(chan result, 1)
	parked := make(chan struct{}, len(sizes))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r, UpgradeOptions{ReadBufferSize: 288})
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		var res result
		for range sizes {
			if c.Park(func(uintptr) bool { parked <- struct{}{}; return true }) && c.shelved && c.br.Size() == 0 {
				res.lent++
			}
			// Parked: nothing reads until the frame is there.
			if err := waitReadable(c.hc.Conn); err != nil {
				res.err = err
				break
			}
			data, err := c.ReadMessage()
			if err != nil {
				res.err = err
				break
			}
			if c.br.Size() != 288 {
				res.err = fmt.Errorf("after a park the read buffer holds %d bytes, want 288", c.br.Size())
				break
			}
			res.seen = append(res.seen, string(data))
		}
		got <- res
	}))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, _, err := Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want []string
	for _, n := range sizes {
		m := strings.Repeat("x", n)
		want = append(want, m)
		select { // the server parks first
		case <-parked:
		case <-ctx.Done():
			t.Fatalf("the server did not park before frame %d within 30s", len(want))
		}
		if err := c.WriteText([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.lent != len(sizes) {
			t.Errorf("%d of %d parks lent the read buffer, want all", r.lent, len(sizes))
		}
		if strings.Join(r.seen, ",") != strings.Join(want, ",") {
			t.Errorf("the server read %d frames of sizes %v, want %v", len(r.seen), lens(r.seen), sizes)
		}
	case <-ctx.Done():
		t.Fatal("the server did not read every frame within 30s")
	}
}

func lens(ss []string) []int {
	var n []int
	for _, s := range ss {
		n = append(n, len(s))
	}
	return n
}
