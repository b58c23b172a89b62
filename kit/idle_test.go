package kit

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestIdleConnectionsHoldNoGoroutine opens idle sessions over raw sockets
// (the client side holds no goroutine and no buffer), each answering one
// keepalive ping, and checks what the kit keeps for each: on Linux it is
// parked, with no reader goroutine and so no stack; elsewhere its reader
// waits on a stack the runtime shrinks to the minimum, instead of deep in
// a frame read (4 KiB or more a connection).
func TestIdleConnectionsHoldNoGoroutine(t *testing.T) {
	b := newBox(t, scripted(nil))
	addr := serveGated(t, b)
	const n = 400
	stats := func() runtime.MemStats {
		runtime.GC()
		runtime.GC() // a stack shrinks by half a collection
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m
	}
	before := stats()
	for range n {
		rawSession(t, addr, b.key) // closed by the test's cleanup
	}
	testkit.Until(t, "every session registered", func() bool {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		return len(b.srv.conns) >= n
	})
	if runtime.GOOS == "linux" {
		testkit.Until(t, "every idle connection parked", func() bool { return b.srv.parkedConns() == n })
	}
	after := stats()
	// Nor a queue: it is taken when a frame comes and given back once the
	// writer has emptied it.
	b.srv.mu.Lock()
	queues := 0
	for c := range b.srv.conns {
		c.qmu.Lock()
		if c.q != nil {
			queues++
		}
		c.qmu.Unlock()
	}
	b.srv.mu.Unlock()
	if queues > 0 {
		t.Errorf("%d of %d idle connections hold an outbound queue, want none", queues, n)
	}
	stack := float64(after.StackInuse-before.StackInuse) / n
	heap := float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / n
	t.Logf("per idle connection: stack %.0f B, heap %.0f B", stack, heap)
	// Where each reader waits, from the goroutine profile: on Linux
	// nowhere (parked); elsewhere in the short wait, none inside a frame
	// read.
	var prof strings.Builder
	pprof.Lookup("goroutine").WriteTo(&prof, 1)
	short, deep := 0, 0
	for _, g := range goroutineGroups(prof.String()) {
		if !strings.Contains(g.stack, "kit.(*Server).readLoop") {
			continue
		}
		switch {
		case strings.Contains(g.stack, "websocket.(*Conn).NextReader"):
			deep += g.count
		case strings.Contains(g.stack, "wsconn.(*Conn).WaitReadable"):
			short += g.count
		}
	}
	if runtime.GOOS == "linux" {
		if short+deep > 0 {
			t.Errorf("of %d parked connections, %d have a reader in WaitReadable and %d inside a frame read; want no reader goroutine", n, short, deep)
		}
		// No goroutine, no stack: what is left is the stacks of the
		// goroutines that served and exited, which the runtime keeps
		// cached as in use, and on a loaded machine the stacks of
		// goroutines still on their way out. A reader's alone would be
		// the 2 KiB minimum, so less than that means none per connection.
		if stack >= 2<<10 {
			t.Errorf("each parked connection holds %.0f B of stack, want less than a goroutine's 2 KiB minimum", stack)
		}
		return
	}
	if short < n || deep > 0 {
		t.Errorf("of %d idle readers, %d wait in WaitReadable and %d inside a frame read; want all in WaitReadable", n, short, deep)
	}
	// A reader waiting deep in a frame read holds a 4 KiB stack; one in
	// WaitReadable holds the 2 KiB minimum. (The race detector makes
	// every frame larger: there the profile above is the check.)
	if !raceEnabled && stack > 3<<10 {
		t.Errorf("each idle connection holds %.0f B of stack, want at most 3 KiB", stack)
	}
}

type goroutineGroup struct {
	count int
	stack string
}

// goroutineGroups parses a goroutine profile written with debug=1: groups
// of identical stacks, each led by a "COUNT @ PCS" line.
func goroutineGroups(prof string) []goroutineGroup {
	var gs []goroutineGroup
	for _, line := range strings.Split(prof, "\n") {
		var count int
		if _, err := fmt.Sscanf(line, "%d @", &count); err == nil {
			gs = append(gs, goroutineGroup{count: count})
			continue
		}
		if len(gs) > 0 {
			gs[len(gs)-1].stack += line + "\n"
		}
	}
	return gs
}

// parkedConns reports how many of the box's connections are parked.
func (s *Server) parkedConns() int {
	if p := s.parker.Load(); p != nil {
		return p.parkedCount()
	}
	return 0
}

// rawSession opens a session over a raw socket, which holds no goroutine
// and no buffer on the client's side, and answers one keepalive ping.
// The test's cleanup closes it.
func rawSession(t *testing.T, addr, key string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: box\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Protocol: %s\r\nAuthorization: Bearer %s\r\n\r\n", SubprotocolV1, key)
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 256), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("raw session: %v %v", resp, err)
	}
	// A keepalive pong (masked, empty), the only traffic of an idle
	// client: the reader must take it and go back to its short wait.
	if _, err := c.Write([]byte{0x8A, 0x80, 1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	return c
}

// serveGated serves b as the kit binary serves it, through its connection
// gate, on a loopback port whose address it returns, until the test ends.
func serveGated(t *testing.T, b *box) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- b.srv.Serve(t.Context(), ln) }()
	t.Cleanup(func() {
		b.srv.Close(t.Context())
		testkit.Recv(t, served, "Serve to return after Close")
	})
	return ln.Addr().String()
}
