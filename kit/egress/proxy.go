package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Secret is an env var the proxy brokers: agents see Placeholder(Name),
// and requests to Hosts carry Value instead.
type Secret struct {
	Name  string
	Value string
	// Hosts are the exact host names the value is sent to.
	Hosts []string
	// Header is the request header that carries the value (e.g.
	// "x-api-key"); an Authorization bearer carries it too.
	Header string
	// Port is the HTTPS port of Hosts the value goes to (0 means 443).
	// A connection to another port is a plain tunnel: only the
	// placeholder can travel in it.
	Port int
	// Form "basic" (protocol.InjectFormBasic) also puts the value into an
	// Authorization: Basic header whose user or password is the
	// placeholder, as Basic base64(User:value): the form git hosts take.
	Form string
	// User is the Basic user name (empty means protocol.InjectBasicUser).
	User string
}

// Options configure a Proxy.
type Options struct {
	// Policy decides connections. Required.
	Policy *Policy
	// Guard holds the addresses closed unless an allow rule opens them.
	// Nil means netguard.Default().
	Guard *netguard.Guard
	// Secrets are brokered.
	Secrets []Secret
	// Seed makes placeholders stable per box (the kit passes the box's
	// key fingerprint): the same seed gives the same placeholders.
	Seed string
	// Resolve looks names up. Nil means the system resolver.
	Resolve Resolver
	// Dial connects to an address the policy allowed. Nil means a
	// net.Dialer. Tests set it to reach loopback upstreams under other
	// names; the policy still decides first.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RootCAs verify the real servers of brokered hosts. Nil means the
	// system roots.
	RootCAs *x509.CertPool
	// Logger receives the proxy's own problems. Nil discards them.
	Logger *slog.Logger
	// Now is the clock of events and certificates. Nil means time.Now.
	Now func() time.Time
	// DialTimeout bounds connecting upstream (default 30s).
	DialTimeout time.Duration
	// MaxConns caps one session's open client connections (default
	// 512); one more is closed at once.
	MaxConns int
	// Audit, when set, records every decision (the box's audit trail).
	Audit *Journal
}

// Session is who a listener serves: its id names its events, and Sink
// (when set) receives one Event per connection, request or block. Sink
// must not block for long.
type Session struct {
	ID   string
	Sink func(Event)
	// Ask, when set, asks the session's client about a connection no
	// rule covers, when the policy says to ask (ask.go).
	Ask AskFunc
	// Rules holds the session's own rule set (nil: none); it may be
	// replaced at any time, and each new connection and request follows
	// the set in force.
	Rules *SessionRules
}

// SessionRules holds one session's own egress rules (a Policy from
// NewSessionPolicy, or nil for none), replaced whole.
type SessionRules struct{ p atomic.Pointer[Policy] }

// Set replaces the session's rules; nil clears them.
func (r *SessionRules) Set(p *Policy) { r.p.Store(p) }

// Get returns the session's rules, nil for none.
func (r *SessionRules) Get() *Policy {
	if r == nil {
		return nil
	}
	return r.p.Load()
}

// Event is one line of the egress log: the data of an "egress" event.
type Event = protocol.EgressEvent

// Stats count what a Proxy decided and carried, over its life.
type Stats struct {
	Allowed, Denied, Failed int64
	BytesOut, BytesIn       int64
}

// Proxy is the egress proxy of one box. It serves any number of
// listeners, one per session, concurrently.
type Proxy struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	resolve Resolver
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	policy  atomic.Pointer[Policy]
	guard   *netguard.Guard
	secrets []secret
	ca      *authority

	allowed, denied, failed atomic.Int64
	bytesOut, bytesIn       atomic.Int64
}

type secret struct {
	Secret
	placeholder string
}

// New checks opts and makes the box's CA.
func New(opts Options) (*Proxy, error) {
	if opts.Policy == nil {
		return nil, errors.New("egress: no policy")
	}
	p := &Proxy{opts: opts, log: opts.Logger, now: opts.Now, resolve: opts.Resolve, dial: opts.Dial}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.guard = opts.Guard
	if p.guard == nil {
		p.guard = netguard.Default()
	}
	if p.resolve == nil {
		p.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if p.dial == nil {
		d := &net.Dialer{}
		p.dial = d.DialContext
	}
	if p.opts.MaxConns <= 0 {
		p.opts.MaxConns = 512
	}
	if p.opts.DialTimeout <= 0 {
		p.opts.DialTimeout = 30 * time.Second
	}
	p.policy.Store(opts.Policy)
	names := map[string]bool{}
	for _, s := range opts.Secrets {
		if s.Name == "" || names[s.Name] {
			return nil, fmt.Errorf("egress: secret name %q is empty or given twice", s.Name)
		}
		names[s.Name] = true
		if len(s.Hosts) == 0 {
			return nil, fmt.Errorf("egress: secret %s has no hosts", s.Name)
		}
		hosts := make([]string, len(s.Hosts))
		for i, h := range s.Hosts {
			hosts[i] = normHost(h)
		}
		s.Hosts = hosts
		if s.Port == 0 {
			s.Port = protocol.InjectPort
		}
		if s.Port < 1 || s.Port > 65535 {
			return nil, fmt.Errorf("egress: secret %s: port %d is not from 1 to 65535", s.Name, s.Port)
		}
		switch s.Form {
		case "":
		case protocol.InjectFormBasic:
			if s.User == "" {
				s.User = protocol.InjectBasicUser
			}
			if strings.Contains(s.User, ":") {
				return nil, fmt.Errorf("egress: secret %s: a Basic user name cannot hold a colon", s.Name)
			}
		default:
			return nil, fmt.Errorf("egress: secret %s: form %q is not %q or empty", s.Name, s.Form, protocol.InjectFormBasic)
		}
		p.secrets = append(p.secrets, secret{Secret: s, placeholder: Placeholder(opts.Seed, s.Name)})
	}
	ca, err := newAuthority(p.now())
	if err != nil {
		return nil, fmt.Errorf("egress: make the box CA: %w", err)
	}
	p.ca = ca
	return p, nil
}

// SetPolicy replaces the policy; it applies to every connection and
// request decided from now on, including the next request on a kept-alive
// connection.
func (p *Proxy) SetPolicy(pol *Policy) {
	if pol != nil {
		p.policy.Store(pol)
	}
}

// Audit returns the audit trail the proxy records to, nil without one.
func (p *Proxy) Audit() *Journal { return p.opts.Audit }

// Policy returns the policy in force.
func (p *Proxy) Policy() *Policy { return p.policy.Load() }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Allowed: p.allowed.Load(), Denied: p.denied.Load(), Failed: p.failed.Load(),
		BytesOut: p.bytesOut.Load(), BytesIn: p.bytesIn.Load(),
	}
}

// Brokered returns the names of the brokered secrets, sorted.
func (p *Proxy) Brokered() []string {
	var names []string
	for _, s := range p.secrets {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// Serve serves ln for one session until ctx ends or ln fails, then
// closes ln and every connection it accepted and returns once they are
// gone. It returns nil when ctx ended or ln was closed.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener, s Session) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer func() {
		stop()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		delay = 0
		mu.Lock()
		if len(conns) >= p.opts.MaxConns {
			mu.Unlock()
			c.Close()
			p.log.Warn("egress: a session is over its connection cap; closing a new one", "session", s.ID, "max", p.opts.MaxConns)
			continue
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			newHandler(p, s, ctx, c).serve()
		}()
	}
}

// handler serves one accepted connection.
type handler struct {
	p   *Proxy
	s   Session
	ctx context.Context
	c   net.Conn
	lim *limiter // caps each request head read through br
	br  *bufio.Reader
	// approved holds the connection's approvals by rule (ask.go).
	approved map[string]string
}

func newHandler(p *Proxy, s Session, ctx context.Context, c net.Conn) *handler {
	lim := &limiter{r: c, n: maxHead}
	return &handler{p: p, s: s, ctx: ctx, c: c, lim: lim, br: bufio.NewReader(lim)}
}

// maxHead caps a request head or SOCKS greeting, and what the reader
// buffers with it.
const maxHead = 1 << 20

var errHeadTooLarge = errors.New("egress: request head larger than 1MB")

// limiter lets at most n bytes through until n is raised: set to maxHead
// before each request head, lifted for bodies and tunnels.
type limiter struct {
	r io.Reader
	n int64
}

func (l *limiter) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

func (l *limiter) head()    { l.n = maxHead }
func (l *limiter) unlimit() { l.n = math.MaxInt64 }

// idleTimeout bounds how long a client connection waits for its next
// request or SOCKS greeting.
const idleTimeout = 5 * time.Minute

func (h *handler) serve() {
	h.c.SetReadDeadline(time.Now().Add(idleTimeout))
	first, err := h.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == socksVersion {
		h.serveSOCKS()
		return
	}
	h.serveHTTP()
}

// rules returns the rules in force for the handler's session now.
func (h *handler) rules() rules {
	return rules{box: h.p.policy.Load(), sess: h.s.Rules.Get()}
}

// decide decides a new connection by the rules in force.
func (h *handler) decide(host string, port int) Decision {
	return h.rules().decide(h.ctx, h.p.guard, h.resolve, host, port)
}

// resolveTimeout bounds one name lookup.
const resolveTimeout = 10 * time.Second

// resolve looks host up with the proxy's resolver, bounded in time.
func (h *handler) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	return h.p.resolve(ctx, host)
}

// emit counts an event and hands it to the session's sink.
func (h *handler) emit(ev Event) {
	ev.Time = h.p.now()
	ev.Session = h.s.ID
	switch ev.Decision {
	case Allow:
		h.p.allowed.Add(1)
	case Deny:
		h.p.denied.Add(1)
	default:
		h.p.failed.Add(1)
	}
	h.p.bytesOut.Add(ev.BytesOut)
	h.p.bytesIn.Add(ev.BytesIn)
	if h.p.opts.Audit != nil {
		h.p.opts.Audit.Record(&ev)
	}
	if h.s.Sink != nil {
		h.s.Sink(ev)
	}
}

// upstream is a connection to an allowed destination, counted.
type upstream struct {
	net.Conn
	host string
	port int
	addr netip.Addr
	out  atomic.Int64
	in   atomic.Int64
	stop func() bool
}

func (u *upstream) Close() error {
	u.stop()
	return u.Conn.Close()
}

func (u *upstream) Read(b []byte) (int, error) {
	n, err := u.Conn.Read(b)
	u.in.Add(int64(n))
	return n, err
}

func (u *upstream) Write(b []byte) (int, error) {
	n, err := u.Conn.Write(b)
	u.out.Add(int64(n))
	return n, err
}

// connect dials the first of d's addresses that answers.
func (h *handler) connect(host string, port int, d Decision) (*upstream, error) {
	ctx, cancel := context.WithTimeout(h.ctx, h.p.opts.DialTimeout)
	defer cancel()
	var errs []error
	for _, a := range d.Addrs {
		c, err := h.p.dial(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
		if err == nil {
			u := &upstream{Conn: c, host: host, port: port, addr: a}
			// When Serve stops, a request waiting on a silent upstream
			// must end too.
			u.stop = context.AfterFunc(h.ctx, func() { c.Close() })
			return u, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("no address to dial for %s", hostPort(host, port))
	}
	return nil, fmt.Errorf("connect to %s: %w", hostPort(host, port), errors.Join(errs...))
}

// pipe copies both ways between the client and the upstream until both
// directions end, passing half-closes on, and returns the bytes each way.
func pipe(client io.Reader, clientConn net.Conn, up *upstream) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst net.Conn, src io.Reader) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
			return
		}
		clientConn.Close()
		up.Close()
	}
	go half(up.Conn, readerCounting{client, &up.out})
	go half(clientConn, readerCounting{up.Conn, &up.in})
	wg.Wait()
	up.Close()
}

type readerCounting struct {
	r io.Reader
	n *atomic.Int64
}

func (r readerCounting) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n.Add(int64(n))
	return n, err
}
