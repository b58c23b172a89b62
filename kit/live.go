package kit

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// live is what the box serves now, under one lock: its sessions, their
// connections and the HTTP servers and gates that accept them. The
// features that list or find sessions are handed it, not the Server.
type live struct {
	mu       sync.Mutex
	sessions map[string]*session
	conns    map[*conn]struct{}
	servers  []*http.Server
	gates    []*gate
	closed   bool
	noPark   bool                   // the epoll set could not be made
	parker   atomic.Pointer[parker] // idle connections without goroutines, made on first use
	wg       sync.WaitGroup         // connections (parked too), runners, grace timers
}

// all returns the sessions, reserved ones (still upgrading, or warm)
// included, in no order.
func (l *live) all() []*session {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*session, 0, len(l.sessions))
	for _, ss := range l.sessions {
		out = append(out, ss)
	}
	return out
}

// removeSession forgets ss, unless a resume has put another session
// under its id.
func (l *live) removeSession(ss *session) {
	l.mu.Lock()
	if l.sessions[ss.id] == ss {
		delete(l.sessions, ss.id)
	}
	l.mu.Unlock()
}

// lookup finds a session by id, nil when there is none.
func (l *live) lookup(id string) *session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sessions[id]
}

// sessionCount reports the live sessions (tests and benchmarks use it).
func (l *live) sessionCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions)
}

// gateCount reports the connections admitted by every listener the
// box serves, and those of them not upgraded to a WebSocket.
func (l *live) gateCount() (all, pending int) {
	l.mu.Lock()
	gates := l.gates
	l.mu.Unlock()
	for _, g := range gates {
		a, p := g.count()
		all += a
		pending += p
	}
	return all, pending
}

// sessionGauges counts the open sessions, their queued prompts and their
// running ones, for /metrics.
func (l *live) sessionGauges() (open, queued, running int) {
	for _, ss := range l.all() {
		if !ss.opened.Load() {
			continue // reserved for a connection still upgrading
		}
		open++
		q, r := ss.prompts.load()
		queued += q
		if r != nil {
			running++
		}
	}
	return open, queued, running
}
