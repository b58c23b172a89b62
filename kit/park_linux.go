package kit

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
)

// parker holds idle connections without a goroutine: a reader that finds
// its connection idle registers the socket here and exits, and one poller
// goroutine, blocked in epoll_wait, starts a fresh reader for each socket
// that turns readable. An idle connection then costs no stack at all.
//
// A parked connection keeps its reader's count in the server's WaitGroup;
// the reader started when it wakes carries that count on, so the server
// waits for parked connections as for running readers.
type parker struct {
	epfd  int
	pipe  [2]int // a byte on pipe[1] wakes the poller to stop
	start func(*conn)
	done  chan struct{} // closed when the poller has returned

	mu     sync.Mutex
	closed bool
	next   uint64
	parked map[uint64]*conn
}

// newParker makes the epoll set and starts its poller; start is called,
// on the poller's goroutine or a waker's, for every connection woken.
func newParker(start func(*conn)) (*parker, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("kit: making the epoll set for idle connections: %w", err)
	}
	p := &parker{epfd: epfd, start: start, done: make(chan struct{}), parked: map[uint64]*conn{}}
	if err := syscall.Pipe2(p.pipe[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("kit: making the wake-up pipe for idle connections: %w", err)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN} // token 0
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.pipe[0], &ev); err != nil {
		p.closeFDs()
		return nil, fmt.Errorf("kit: registering the wake-up pipe for idle connections: %w", err)
	}
	go p.poll()
	return p, nil
}

func (p *parker) closeFDs() {
	syscall.Close(p.pipe[0])
	syscall.Close(p.pipe[1])
	syscall.Close(p.epfd)
}

// park registers c's socket fd. It reports false, and c stays with its
// reader, when c is finished or the parker stopped. fd must stay open
// during the call; c's socket is closed only after wake took it out.
func (p *parker) park(c *conn, fd uintptr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || c.ended.Load() {
		return false
	}
	p.next++
	tok := p.next
	ev := syscall.EpollEvent{
		Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT,
		Fd:     int32(uint32(tok)),
		Pad:    int32(uint32(tok >> 32)),
	}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
		return false
	}
	c.parkTok, c.parkFD = tok, int(fd)
	p.parked[tok] = c
	return true
}

// takeLocked removes a parked connection from the set. p.mu is held.
func (p *parker) takeLocked(c *conn) {
	syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, c.parkFD, nil)
	delete(p.parked, c.parkTok)
	c.parkTok, c.parkFD = 0, -1
}

// wake starts a reader for c if it is parked. Of the poller and every
// waker, exactly one starts it.
func (p *parker) wake(c *conn) {
	p.mu.Lock()
	if c.parkTok == 0 {
		p.mu.Unlock()
		return
	}
	p.takeLocked(c)
	p.mu.Unlock()
	p.start(c)
}

// poll starts a reader for every parked connection that turns readable
// (or hangs up), until stop.
func (p *parker) poll() {
	defer close(p.done)
	evs := make([]syscall.EpollEvent, 128)
	woken := make([]*conn, 0, len(evs))
	for {
		n, err := syscall.EpollWait(p.epfd, evs, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			p.shut() // no connection may stay parked without a poller
			return
		}
		woken = woken[:0]
		stop := false
		p.mu.Lock()
		for _, ev := range evs[:n] {
			tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if tok == 0 {
				stop = p.closed
				continue
			}
			if c := p.parked[tok]; c != nil { // else taken by a waker
				p.takeLocked(c)
				woken = append(woken, c)
			}
		}
		p.mu.Unlock()
		for i, c := range woken {
			p.start(c)
			woken[i] = nil
		}
		if len(woken) > 0 {
			// The readers just started wait in this goroutine's run
			// queue; blocking in epoll_wait now would hold them there
			// until the runtime takes the processor back (up to 10 ms on
			// a busy machine): let them run first.
			runtime.Gosched()
		}
		if stop {
			return
		}
	}
}

// shut refuses further parking and wakes every parked connection.
func (p *parker) shut() {
	p.mu.Lock()
	p.closed = true
	var woken []*conn
	for _, c := range p.parked {
		woken = append(woken, c)
	}
	for _, c := range woken {
		p.takeLocked(c)
	}
	p.mu.Unlock()
	for _, c := range woken {
		p.start(c)
	}
}

// stop wakes whatever is still parked, stops the poller and closes the
// epoll set. The server calls it once every connection has ended; later
// readers wait on their own goroutines.
func (p *parker) stop() {
	p.shut()
	syscall.Write(p.pipe[1], []byte{0})
	<-p.done
	p.closeFDs()
}

// parkedCount reports how many connections are parked (tests use it).
func (p *parker) parkedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}
