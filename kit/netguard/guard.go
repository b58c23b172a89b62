package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrClosed is wrapped by the error a Guard's dial hook returns for a
// closed address.
var ErrClosed = errors.New("netguard: address closed")

// ClosedError is the error of a dial to a closed address.
type ClosedError struct {
	Closure
	// Hint says how to open it, for the caller's users.
	Hint string
}

func (e *ClosedError) Error() string {
	s := "refusing to connect to " + e.Closure.String()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *ClosedError) Unwrap() error { return ErrClosed }

// Options configure a Guard. The zero value reads the system.
type Options struct {
	// Open are ranges opened for every check, as an allow rule naming
	// them would: for tests whose hosts live in 198.18.0.0/15, and for
	// callers with a fixed list. A range opens a row only when it is no
	// wider than the row.
	Open []netip.Prefix
	// Addrs lists the host's own addresses. Nil means the addresses of
	// every interface (net.InterfaceAddrs).
	Addrs func() ([]netip.Addr, error)
	// Ports lists the kit's own listening TCP ports. Nil means this
	// process's listening sockets.
	Ports func() ([]int, error)
	// MaxAge is how old the host's addresses and ports may be when a
	// check uses them (default one second).
	MaxAge time.Duration
	// Now is the clock of MaxAge. Nil means time.Now.
	Now func() time.Time
}

// Guard checks addresses against the table, the host's own addresses and
// the kit's own ports. It is safe for concurrent use.
type Guard struct {
	opts Options
	mu   sync.Mutex // held while re-reading
	snap atomic.Pointer[snapshot]
}

// snapshot is what the system said at one time.
type snapshot struct {
	at    time.Time
	addrs map[netip.Addr]bool
	ports map[int]bool
}

// New returns a Guard.
func New(opts Options) *Guard {
	if opts.MaxAge <= 0 {
		opts.MaxAge = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Addrs == nil {
		opts.Addrs = interfaceAddrs
	}
	if opts.Ports == nil {
		opts.Ports = listeningPorts
	}
	opts.Open = slices.Clone(opts.Open)
	return &Guard{opts: opts}
}

var (
	stdOnce sync.Once
	std     *Guard
)

// Default returns the process's Guard, reading the system.
func Default() *Guard {
	stdOnce.Do(func() { std = New(Options{}) })
	return std
}

// interfaceAddrs returns the addresses of every interface but loopback
// ones (the table closes those).
func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("read the host's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if x, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, x.Unmap())
		}
	}
	return out, nil
}

// current returns the snapshot, re-read when older than MaxAge. A failed
// read keeps what was known and tries again at the next check.
func (g *Guard) current() *snapshot {
	now := g.opts.Now()
	s := g.snap.Load()
	if s != nil && now.Sub(s.at) < g.opts.MaxAge && !now.Before(s.at) {
		return s
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s = g.snap.Load(); s != nil && now.Sub(s.at) < g.opts.MaxAge && !now.Before(s.at) {
		return s
	}
	next := &snapshot{at: now, addrs: map[netip.Addr]bool{}, ports: map[int]bool{}}
	as, aerr := g.opts.Addrs()
	ps, perr := g.opts.Ports()
	if s != nil && aerr != nil {
		next.addrs = s.addrs
	}
	if s != nil && perr != nil {
		next.ports = s.ports
	}
	for _, a := range as {
		if a = a.WithZone("").Unmap(); !a.IsLoopback() {
			next.addrs[a] = true
		}
	}
	for _, p := range ps {
		next.ports[p] = true
	}
	if aerr != nil || perr != nil {
		next.at = now.Add(-g.opts.MaxAge) // try again next time
	}
	g.snap.Store(next)
	return next
}

// Refresh re-reads the host's addresses and ports now.
func (g *Guard) Refresh() {
	g.mu.Lock()
	g.snap.Store(nil)
	g.mu.Unlock()
	g.current()
}

// Check decides a dial to a, port: it returns the first closure the
// caller has not opened, and whether there is one. open, which may be
// nil, opens closures on the caller's terms (an allow rule, an operator
// switch); Options.Open opens too.
func (g *Guard) Check(a netip.Addr, port int, open func(Closure) bool) (Closure, bool) {
	var buf [6]Closure
	cs := g.closures(a, port, buf[:0])
	for _, c := range cs {
		if g.opened(a, c) || (open != nil && open(c)) {
			continue
		}
		return c, true
	}
	return Closure{}, false
}

func (g *Guard) opened(a netip.Addr, c Closure) bool {
	for _, p := range g.opts.Open {
		if c.Opens(a, p, 0) {
			return true
		}
	}
	return false
}

// closures lists every closure of a, port: the host's own address, the
// fixed rows, then the kit's own port.
func (g *Guard) closures(a netip.Addr, port int, out []Closure) []Closure {
	a = a.WithZone("").Unmap()
	s := g.current()
	self := func(x netip.Addr) bool { return s.addrs[x] }
	v4, how, embeds := Embedded(a)
	switch {
	case self(a):
		out = append(out, Closure{Row: Row{Prefix: netip.PrefixFrom(a, a.BitLen()), What: "an address of this host", Class: Host}, Addr: a})
	case embeds && self(v4):
		out = append(out, Closure{Row: Row{Prefix: netip.PrefixFrom(v4, 32), What: "an address of this host", Class: Host}, Addr: v4, Via: how + " " + a.String()})
	}
	out = fixed(a, out)
	if s.ports[port] {
		for _, x := range []netip.Addr{a, v4} {
			if x.IsValid() && (x.IsLoopback() || x.IsUnspecified() || self(x) || (x.Is4() && thisNet.Contains(x))) {
				out = append(out, Closure{Row: Row{Prefix: netip.PrefixFrom(x, x.BitLen()), What: "the kit's own port", Class: Kit}, Addr: x, Port: port})
				break
			}
		}
	}
	return out
}

var thisNet = netip.MustParsePrefix("0.0.0.0/8")

// Control returns a net.Dialer Control hook that refuses a closed
// address: it runs on every socket before it connects, with the address
// it connects to, so neither a redirect nor a DNS answer that changes
// gets past it. hint goes into the error.
func (g *Guard) Control(open func(Closure) bool, hint func(Closure) string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: not an address and port: %w", address, ErrClosed)
		}
		if c, closed := g.Check(ap.Addr(), int(ap.Port()), open); closed {
			e := &ClosedError{Closure: c}
			if hint != nil {
				e.Hint = hint(c)
			}
			return e
		}
		return nil
	}
}
