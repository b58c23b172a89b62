package kit

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// After a burst of connections opening or closing, the kit hands back to
// the system the memory the burst freed, once connections stop coming.
// Go collects garbage as the heap grows, not when a process goes quiet:
// a burst's garbage (the handshakes' buffers, ended sessions' frames)
// stays in the kit's RSS until the runtime's periodic collection two
// minutes later, and is then returned slowly. A box that has just taken
// 10,000 connections would look about 40% larger than what it holds, to
// the platform that bills it and to the memory limit that may kill it.

const (
	// memoryChurn is how many connections must open or close after the
	// last return for the next to be worth its collection.
	memoryChurn = 256
	// memoryQuiet is how long no connection may open or close before the
	// kit returns memory.
	memoryQuiet = time.Second
)

// memoryReturner counts connections opened and closed and, after enough
// of them and a quiet second, collects and returns freed memory.
type memoryReturner struct {
	quiet   time.Duration
	collect func() // debug.FreeOSMemory; tests count
	churn   atomic.Int64

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func newMemoryReturner(quiet time.Duration, collect func()) *memoryReturner {
	if quiet <= 0 {
		quiet = memoryQuiet
	}
	if collect == nil {
		collect = debug.FreeOSMemory
	}
	return &memoryReturner{quiet: quiet, collect: collect}
}

// note counts a connection opened or closed. Past memoryChurn it (re)arms
// the quiet timer: a burst keeps pushing the return back until it ends.
func (m *memoryReturner) note() {
	if m.churn.Add(1) < memoryChurn {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.stopped:
	case m.timer == nil:
		m.timer = time.AfterFunc(m.quiet, m.fire)
	default:
		m.timer.Reset(m.quiet)
	}
}

func (m *memoryReturner) fire() {
	m.churn.Store(0)
	m.collect()
}

// stop disarms the timer for good (Server.Close).
func (m *memoryReturner) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	if m.timer != nil {
		m.timer.Stop()
	}
}
