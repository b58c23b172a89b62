package kit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/waittest"
)

// TestIdleConnectionsHoldSmallStacks opens idle sessions over raw sockets
// (the client side holds no goroutine and no buffer) and checks what the
// kit keeps for each: its reader waits on a stack the runtime shrinks to
// the minimum, instead of deep in a frame read (4 KiB or more a
// connection).
func TestIdleConnectionsHoldSmallStacks(t *testing.T) {
	b := newBox(t, scripted(nil))
	addr := strings.TrimPrefix(b.url, "http://")
	const n = 400
	stats := func() runtime.MemStats {
		runtime.GC()
		runtime.GC() // a stack shrinks by half a collection
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m
	}
	before := stats()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: box\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+
			"Sec-WebSocket-Protocol: %s\r\nAuthorization: Bearer %s\r\n\r\n", SubprotocolV1, b.key)
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 256), nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
	}
	waittest.Until(t, "every session registered", func() bool {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		return len(b.srv.conns) >= n
	})
	after := stats()
	stack := float64(after.StackInuse-before.StackInuse) / n
	heap := float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / n
	t.Logf("per idle connection: stack %.0f B, heap %.0f B", stack, heap)
	// A reader waiting deep in a frame read holds a 4 KiB stack, 6 KiB or
	// more under the race detector; one waiting in WaitReadable holds the
	// 2 KiB minimum, under 5 KiB with the race detector.
	limit := 3 << 10
	if raceEnabled {
		limit = 5632
	}
	if stack > float64(limit) {
		t.Errorf("each idle connection holds %.0f B of stack, want at most %d: its reader waits deep in a read", stack, limit)
	}
}
