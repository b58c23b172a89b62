package kit

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestMemoryReturnedAfterABurst: once enough connections have opened or
// closed and a quiet spell follows, the kit collects and returns memory,
// once per burst; a trickle of connections costs no collection.
func TestMemoryReturnedAfterABurst(t *testing.T) {
	const quiet = 200 * time.Millisecond
	var collections atomic.Int64
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) {
		o.memoryQuiet = quiet
		o.collect = func() { collections.Add(1) }
	})
	addr := serveGated(t, b)
	registered := func(n int) func() bool {
		return func() bool {
			b.srv.mu.Lock()
			defer b.srv.mu.Unlock()
			return len(b.srv.conns) == n
		}
	}

	// A trickle: fewer than memoryChurn connections, then quiet.
	const trickle = memoryChurn / 2
	conns := make([]net.Conn, 0, 2*memoryChurn)
	for range trickle {
		conns = append(conns, rawSession(t, addr, b.key))
	}
	testkit.Until(t, "the trickle's sessions registered", registered(trickle))
	time.Sleep(3 * quiet) // the quiet spell is the subject
	if n := collections.Load(); n != 0 {
		t.Fatalf("%d collections after %d connections, want none below %d", n, trickle, memoryChurn)
	}

	// A burst past memoryChurn: one collection once it is over.
	for range 2*memoryChurn - trickle {
		conns = append(conns, rawSession(t, addr, b.key))
	}
	testkit.Until(t, "the burst's sessions registered", registered(len(conns)))
	testkit.Until(t, "a collection after the burst", func() bool { return collections.Load() >= 1 })
	time.Sleep(3 * quiet)
	if n := collections.Load(); n != 1 {
		t.Fatalf("%d collections after one burst and a quiet spell, want 1", n)
	}

	// Closing them all is a burst too.
	for _, c := range conns {
		c.Close()
	}
	testkit.Until(t, "every connection gone", registered(0))
	testkit.Until(t, "a collection after the closing burst", func() bool { return collections.Load() >= 2 })
	time.Sleep(3 * quiet)
	if n := collections.Load(); n != 2 {
		t.Fatalf("%d collections after two bursts, want 2", n)
	}
}
