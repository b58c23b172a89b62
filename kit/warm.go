package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Warm sessions. A box keeps [agent] warm sessions started ahead of time:
// each has its id, its directories, its sandbox (uid, cgroup, a supervisor
// holding its namespaces) and its agent's conversation opened (an ACP
// agent spawned, initialize and session/new answered). A new connection
// takes one, so its first prompt starts nothing. The pool prepares a
// session exactly as a cold session's first prompt does, with the same
// code, under the id the session will have: its GLOVEBOX_* paths, its
// environment and its preamble are a cold session's. The id stays secret
// until the session's hello. A session is taken once and never returns;
// one whose agent or supervisor dies while it waits is ended and replaced.

// warmSpawns caps how many warm sessions start at once, so that refilling
// never starves running prompts.
const warmSpawns = 2

// errWarmLost ends a waiting warm session whose agent or sandbox died.
var errWarmLost = errors.New("kit: a warm session's agent or sandbox ended while it waited")

// WarmStats are the warm pool's counters, for /metrics.
type WarmStats struct {
	Size     int    // the pool's configured size
	Ready    int    // sessions waiting, ready
	Starting int    // sessions being prepared
	Taken    uint64 // connections that got a warm session
	Missed   uint64 // connections that found the pool empty and started cold
	Replaced uint64 // waiting sessions that died and were replaced
	Failed   uint64 // preparations that failed
}

type warmPool struct {
	s    *Server
	size int
	sem  chan struct{}

	mu       sync.Mutex
	ready    []*warmEntry
	starting int
	closed   bool
	timer    *time.Timer    // a refill to come
	wg       sync.WaitGroup // spawns and watchers

	taken, missed, replaced, failed atomic.Uint64
}

type warmEntry struct {
	ss    *session
	taken chan struct{} // closed when a connection takes it
}

func newWarmPool(s *Server, size int) *warmPool {
	p := &warmPool{s: s, size: size, sem: make(chan struct{}, warmSpawns)}
	p.fill()
	return p
}

// fill starts as many sessions as the pool lacks.
func (p *warmPool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for n := p.size - len(p.ready) - p.starting; n > 0; n-- {
		p.starting++
		p.wg.Add(1)
		go p.spawn()
	}
}

// spawn prepares one session and puts it in the pool.
func (p *warmPool) spawn() {
	defer p.wg.Done()
	ok := false
	defer func() {
		if !ok {
			p.mu.Lock()
			p.starting--
			p.mu.Unlock()
		}
	}()
	select {
	case p.sem <- struct{}{}:
	case <-p.s.ctx.Done():
		return
	}
	ss := p.s.newSession()
	lost, err := ss.warmUp()
	<-p.sem
	if err != nil {
		p.failed.Add(1)
		if p.s.ctx.Err() == nil {
			p.s.log.Warn("warm session: could not prepare one; new sessions start cold until one is taken", "err", err)
		}
		ss.end(errClosed)
		return
	}
	e := &warmEntry{ss: ss, taken: make(chan struct{})}
	p.mu.Lock()
	p.starting--
	ok = true
	if p.closed {
		p.mu.Unlock()
		ss.end(errShutdown)
		return
	}
	p.ready = append(p.ready, e)
	p.wg.Add(1)
	p.mu.Unlock()
	go p.watch(e, lost)
}

// watch ends and replaces a waiting session whose agent or sandbox died.
func (p *warmPool) watch(e *warmEntry, lost []<-chan struct{}) {
	defer p.wg.Done()
	// One goroutine per waiting session: the pool is small.
	died := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range lost {
		if ch == nil {
			continue
		}
		go func() {
			select {
			case <-ch:
				select {
				case died <- struct{}{}:
				case <-stop:
				}
			case <-stop:
			}
		}()
	}
	select {
	case <-e.taken:
		return
	case <-p.s.ctx.Done():
		return // close ends it
	case <-died:
	}
	p.mu.Lock()
	i := -1
	for j, r := range p.ready {
		if r == e {
			i = j
		}
	}
	if i < 0 {
		p.mu.Unlock()
		return // taken at the same moment: take saw it dead and ended it
	}
	p.ready = append(p.ready[:i], p.ready[i+1:]...)
	p.mu.Unlock()
	p.replaced.Add(1)
	e.ss.logger().Info("warm session lost its agent or sandbox while waiting; replacing it")
	e.ss.end(errWarmLost)
	p.fill()
}

// take hands out a ready session, or nil when there is none. It never
// hands out one whose agent or sandbox has ended.
func (p *warmPool) take() *session {
	if p == nil {
		return nil
	}
	for {
		p.mu.Lock()
		if len(p.ready) == 0 || p.closed {
			p.mu.Unlock()
			p.missed.Add(1)
			p.refillLater()
			return nil
		}
		e := p.ready[0]
		p.ready = p.ready[1:]
		close(e.taken)
		p.mu.Unlock()
		if !e.ss.warmAlive() {
			p.replaced.Add(1)
			e.ss.end(errWarmLost)
			continue
		}
		p.taken.Add(1)
		// The refill waits a moment: the session just taken is about to
		// run its first prompt, which a spawn would compete with.
		p.refillLater()
		return e.ss
	}
}

// environment adds the number of ready sessions to an /environment body.
func (p *warmPool) environment(body []byte) []byte {
	if p == nil {
		return body
	}
	p.mu.Lock()
	ready := len(p.ready)
	p.mu.Unlock()
	if ready == 0 {
		return body
	}
	static, _ := json.Marshal(protocol.WarmEnvironment{Size: p.size})
	live, _ := json.Marshal(protocol.WarmEnvironment{Size: p.size, Ready: ready})
	return bytes.Replace(body, append([]byte(`"warm":`), static...), append([]byte(`"warm":`), live...), 1)
}

// warmRefillDelay is how long a refill after a take waits.
const warmRefillDelay = 200 * time.Millisecond

func (p *warmPool) refillLater() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.timer != nil {
		return
	}
	p.timer = time.AfterFunc(warmRefillDelay, func() {
		p.mu.Lock()
		p.timer = nil
		p.mu.Unlock()
		p.fill()
	})
}

// close ends every waiting session and waits for the spawns in progress.
func (p *warmPool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range ready {
		wg.Go(func() { e.ss.end(errShutdown) })
	}
	wg.Wait()
	p.wg.Wait()
}

// warmHandshake bounds how long a warm session's agent may take to
// become ready.
const warmHandshake = 2 * time.Minute

// warmUp prepares the session as its first prompt would, starts its
// sandbox's supervisor and waits for its agent to be ready. It returns the
// channels closed when the session is no longer warm.
func (ss *session) warmUp() ([]<-chan struct{}, error) {
	if err := ss.prepare(); err != nil {
		return nil, err
	}
	box := ss.workspace.info.Sandbox
	if err := box.Warm(); err != nil {
		return nil, err
	}
	lost := []<-chan struct{}{box.Lost()}
	if w, ok := ss.conv.(agent.Warmer); ok {
		ctx, cancel := context.WithTimeout(ss.ctx, warmHandshake)
		defer cancel()
		l, err := w.Ready(ctx)
		if err != nil {
			return nil, err
		}
		lost = append(lost, l)
	}
	ss.warmLost = lost
	return lost, nil
}

// warmAlive reports whether nothing a warm session holds has ended.
func (ss *session) warmAlive() bool {
	for _, ch := range ss.warmLost {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
			return false
		default:
		}
	}
	return true
}
