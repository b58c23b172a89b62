package netguard

import (
	"errors"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// fixedGuard is a Guard whose host has the addresses self and listens on
// ports, on a clock the test moves.
type fixedGuard struct {
	mu    sync.Mutex
	self  []netip.Addr
	ports []int
	now   time.Time
}

func (f *fixedGuard) guard(open ...netip.Prefix) *Guard {
	return New(Options{
		Open: open,
		Addrs: func() ([]netip.Addr, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return slices.Clone(f.self), nil
		},
		Ports: func() ([]int, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return slices.Clone(f.ports), nil
		},
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.now
		},
	})
}

// TestRows: every row of the table closes its addresses, in each
// spelling an address can take. The list is written out, not derived
// from the table, so that a row removed fails here.
func TestRows(t *testing.T) {
	t.Parallel()
	f := &fixedGuard{self: []netip.Addr{netip.MustParseAddr("192.0.2.77"), netip.MustParseAddr("2001:4860::77")}, ports: []int{8080}, now: time.Unix(1e9, 0)}
	g := f.guard()
	tests := []struct {
		host string
		port int
		what string
	}{
		{"169.254.169.254", 80, "cloud metadata"},
		{"fd00:ec2::254", 80, "cloud metadata"},
		{"168.63.129.16", 80, "cloud metadata"},
		{"100.100.100.200", 80, "cloud metadata"},
		{"127.0.0.1", 80, "loopback"},
		{"127.255.0.9", 80, "loopback"},
		{"::1", 80, "loopback"},
		{"0.0.0.0", 80, "unspecified (this network)"},
		{"0.1.2.3", 80, "unspecified (this network)"},
		{"::", 80, "unspecified"},
		{"169.254.1.1", 80, "link-local"},
		{"fe80::1", 80, "link-local"},
		{"10.0.5.3", 5432, "private (RFC 1918)"},
		{"172.16.0.1", 80, "private (RFC 1918)"},
		{"172.31.255.255", 80, "private (RFC 1918)"},
		{"192.168.1.1", 80, "private (RFC 1918)"},
		{"100.64.0.1", 80, "carrier-grade NAT (RFC 6598)"},
		{"fd12::1", 80, "unique local (private IPv6)"},
		{"fc00::1", 80, "unique local (private IPv6)"},
		{"224.0.0.1", 80, "multicast"},
		{"239.1.1.1", 80, "multicast"},
		{"ff02::1", 80, "multicast"},
		{"255.255.255.255", 80, "broadcast"},
		{"240.0.0.1", 80, "reserved (240.0.0.0/4)"},
		{"192.0.0.170", 80, "IETF protocol assignments (192.0.0.0/24)"},
		{"192.0.2.1", 80, "documentation (TEST-NET-1)"},
		{"198.51.100.1", 80, "documentation (TEST-NET-2)"},
		{"203.0.113.1", 80, "documentation (TEST-NET-3)"},
		{"192.88.99.1", 80, "6to4 relay anycast (deprecated)"},
		{"198.18.0.1", 80, "benchmarking (RFC 2544)"},
		{"198.19.255.1", 80, "benchmarking (RFC 2544)"},
		{"100::1", 80, "discard-only (RFC 6666)"},
		{"64:ff9b:1::8.8.8.8", 80, "local-use NAT64 (RFC 8215)"},
		{"2001::1", 80, "IETF protocol assignments (2001::/23: Teredo, benchmarking, ORCHID)"},
		{"2001:2::1", 80, "IETF protocol assignments (2001::/23: Teredo, benchmarking, ORCHID)"},
		{"2001:db8::1", 80, "documentation (2001:db8::/32)"},
		{"3fff::1", 80, "documentation (3fff::/20)"},
		{"5f00::1", 80, "segment routing (RFC 9602)"},
		{"fec0::1", 80, "site-local (deprecated)"},
		// The host's own addresses, and the kit's own port on them.
		{"192.0.2.77", 80, "an address of this host"},
		{"2001:4860::77", 80, "an address of this host"},
		{"::ffff:192.0.2.77", 80, "an address of this host"},
		// Metadata in every spelling.
		{"::ffff:169.254.169.254", 80, "cloud metadata"},
		{"[::ffff:a9fe:a9fe]", 80, "cloud metadata"},
		{"::169.254.169.254", 80, "cloud metadata"},
		{"64:ff9b::169.254.169.254", 80, "cloud metadata"},
		{"64:ff9b::a9fe:a9fe", 80, "cloud metadata"},
		{"64:ff9b:1::a9fe:a9fe", 80, "local-use NAT64 (RFC 8215)"},
		{"2002:a9fe:a9fe::1", 80, "cloud metadata"},
		{"2002:a83f:8110::", 80, "cloud metadata"},
		{"64:ff9b::10.0.0.1", 80, "private (RFC 1918)"},
		{"2852039166", 80, "cloud metadata"},
		{"0251.0376.0251.0376", 80, "cloud metadata"},
		{"0xa9fea9fe", 80, "cloud metadata"},
		{"0xA9.0xFE.0xA9.0xFE", 80, "cloud metadata"},
		{"169.254.43518", 80, "cloud metadata"},
		{"169.16689662", 80, "cloud metadata"},
		{"0x7f.1", 80, "loopback"},
		{"017700000001", 80, "loopback"},
		{"0", 80, "unspecified (this network)"},
		{"fe80::1%eth0", 80, "link-local"},
	}
	for _, tt := range tests {
		a, ok := ParseHost(tt.host)
		if !ok {
			t.Errorf("ParseHost(%q) = not an address", tt.host)
			continue
		}
		c, closed := g.Check(a, tt.port, nil)
		if !closed || c.What != tt.what {
			t.Errorf("Check(%s (%s), %d) = %q, %v; want closed as %q", tt.host, a, tt.port, c.What, closed, tt.what)
		}
	}
	for _, open := range []string{"8.8.8.8", "2606:4700::1111", "64:ff9b::8.8.8.8", "2002:808:808::1", "1.1.1.1", "172.32.0.1", "100.128.0.1", "11.0.0.1"} {
		if c, closed := g.Check(netip.MustParseAddr(open), 443, nil); closed {
			t.Errorf("Check(%s) = closed as %q, want open", open, c.What)
		}
	}
}

// TestKitPort: the kit's own port is closed on loopback and the host's
// addresses even where they are opened, unless the port is named.
func TestKitPort(t *testing.T) {
	t.Parallel()
	f := &fixedGuard{self: []netip.Addr{netip.MustParseAddr("192.0.2.77")}, ports: []int{8080}, now: time.Unix(1e9, 0)}
	g := f.guard()
	openBy := func(rule string, port int) func(Closure) bool {
		p := netip.MustParsePrefix(rule)
		return func(c Closure) bool { return c.Opens(netip.Addr{}, p, port) }
	}
	tests := []struct {
		addr   string
		port   int
		open   func(Closure) bool
		closed string
	}{
		{"127.0.0.1", 8080, openBy("127.0.0.0/8", 0), "the kit's own port"},
		{"127.0.0.1", 8081, openBy("127.0.0.0/8", 0), ""},
		{"127.0.0.1", 8080, openBy("127.0.0.1/32", 8080), ""},
		{"::ffff:127.0.0.1", 8080, openBy("127.0.0.0/8", 0), "the kit's own port"},
		{"192.0.2.77", 8080, openBy("192.0.2.77/32", 0), "the kit's own port"},
		{"192.0.2.77", 8080, openBy("192.0.2.77/32", 8080), ""},
		{"192.0.2.78", 8080, openBy("192.0.2.0/24", 8080), ""},
		{"192.0.2.77", 22, openBy("192.0.2.0/24", 0), "an address of this host"},
		{"8.8.8.8", 8080, nil, ""},
	}
	for _, tt := range tests {
		c, closed := g.Check(netip.MustParseAddr(tt.addr), tt.port, tt.open)
		if got := map[bool]string{true: c.What}[closed]; got != tt.closed {
			t.Errorf("Check(%s, %d) = %q, want %q", tt.addr, tt.port, got, tt.closed)
		}
	}
}

// TestOpens: a rule opens a row when it names the address or a range no
// wider than the row.
func TestOpens(t *testing.T) {
	t.Parallel()
	g := (&fixedGuard{now: time.Unix(1e9, 0)}).guard()
	tests := []struct {
		addr, rule string
		open       bool
	}{
		{"10.0.5.3", "10.0.5.0/24", true},
		{"10.0.5.3", "10.0.0.0/8", true},
		{"10.0.5.3", "0.0.0.0/0", false},
		{"10.0.5.3", "10.0.6.0/24", false},
		{"169.254.169.254", "169.254.0.0/16", false}, // opens link-local, not metadata
		{"169.254.1.1", "169.254.0.0/16", true},
		{"169.254.169.254", "169.254.169.254/32", true},
		{"64:ff9b::a9fe:a9fe", "169.254.169.254/32", true},
		{"64:ff9b::a9fe:a9fe", "64:ff9b::a9fe:a9fe/128", true},
		{"64:ff9b::a9fe:a9fe", "64:ff9b::/96", false},
		{"fd00:ec2::254", "fd00::/8", false},
		{"fd12::1", "fd00::/8", true},
		{"198.18.5.2", "198.18.0.0/15", true},
		{"198.18.5.2", "198.0.0.0/8", false},
	}
	for _, tt := range tests {
		p := netip.MustParsePrefix(tt.rule)
		_, closed := g.Check(netip.MustParseAddr(tt.addr), 80, func(c Closure) bool { return c.Opens(netip.MustParseAddr(tt.addr), p, 0) })
		if closed == tt.open {
			t.Errorf("rule %s opens %s = %v, want %v", tt.rule, tt.addr, !closed, tt.open)
		}
		// Options.Open opens the same way.
		_, closed = (&fixedGuard{now: time.Unix(1e9, 0)}).guard(p).Check(netip.MustParseAddr(tt.addr), 80, nil)
		if closed == tt.open {
			t.Errorf("Options.Open %s opens %s = %v, want %v", tt.rule, tt.addr, !closed, tt.open)
		}
	}
}

// TestSelfReread: an address the host gains is closed once the snapshot
// is older than MaxAge, without anyone calling Refresh.
func TestSelfReread(t *testing.T) {
	t.Parallel()
	f := &fixedGuard{now: time.Unix(1e9, 0)}
	g := f.guard()
	a := netip.MustParseAddr("8.8.4.4")
	if _, closed := g.Check(a, 80, nil); closed {
		t.Fatal("closed before the host had the address")
	}
	f.mu.Lock()
	f.self = append(f.self, a)
	f.ports = append(f.ports, 9999)
	f.now = f.now.Add(500 * time.Millisecond)
	f.mu.Unlock()
	if _, closed := g.Check(a, 80, nil); closed {
		t.Fatal("re-read before MaxAge")
	}
	f.mu.Lock()
	f.now = f.now.Add(time.Second)
	f.mu.Unlock()
	if c, closed := g.Check(a, 80, nil); !closed || c.What != "an address of this host" {
		t.Fatalf("Check after the host gained %s = %+v, %v; want closed", a, c, closed)
	}
	if c, closed := g.Check(netip.MustParseAddr("127.0.0.1"), 9999, func(c Closure) bool { return c.Class == Host }); !closed || c.Class != Kit {
		t.Fatalf("the new port: %+v, %v", c, closed)
	}
	// A clock that goes back re-reads too.
	f.mu.Lock()
	f.self = nil
	f.now = f.now.Add(-time.Hour)
	f.mu.Unlock()
	if _, closed := g.Check(a, 80, nil); closed {
		t.Fatal("not re-read after the clock went back")
	}
}

func TestControl(t *testing.T) {
	t.Parallel()
	g := (&fixedGuard{now: time.Unix(1e9, 0)}).guard()
	ctl := g.Control(nil, func(c Closure) string { return "ask the operator" })
	err := ctl("tcp4", "169.254.169.254:80", nil)
	var ce *ClosedError
	if !errors.Is(err, ErrClosed) || !errors.As(err, &ce) || ce.What != "cloud metadata" || ce.Hint != "ask the operator" {
		t.Errorf("Control(metadata) = %v", err)
	}
	if err := ctl("tcp4", "8.8.8.8:80", nil); err != nil {
		t.Errorf("Control(8.8.8.8) = %v", err)
	}
	if err := ctl("tcp", "garbage", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Control(garbage) = %v", err)
	}
}

func TestParseHost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"1.2.3.4", "1.2.3.4"}, {"[::1]", "::1"}, {"1.2.3.4.", "1.2.3.4"}, {"0x0a.0.0.1", "10.0.0.1"},
		{"012.1", "10.0.0.1"}, {"4294967295", "255.255.255.255"}, {"1.2.65535", "1.2.255.255"},
		{"example.com", ""}, {"1.2.3.4.5", ""}, {"4294967296", ""}, {"1.256.1.1", ""}, {"1.2.65536", ""},
		{"09", ""}, {"0x", "0.0.0.0"}, {"", ""}, {"1..2", ""}, {"+1", ""}, {"0x-1", ""}, {"1_0", ""},
	} {
		a, ok := ParseHost(tt.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("ParseHost(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"2852039166", "0251.0376.0251.0376", "0xa9fea9fe", "169.254.43518", "[::ffff:1.2.3.4]", "64:ff9b::1.2.3.4", "2002:a9fe:a9fe::", "example.com", "1.2.3.4.", "0x", "fe80::1%eth0"} {
		f.Add(s)
	}
	g := New(Options{Addrs: func() ([]netip.Addr, error) { return nil, nil }, Ports: func() ([]int, error) { return []int{80}, nil }})
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseHost(s)
		if !ok {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("ParseHost(%q) = %v", s, a)
		}
		c, closed := g.Check(a, 80, nil)
		if closed && (c.What == "" || !c.Addr.IsValid()) {
			t.Fatalf("Check(%s) = %+v", a, c)
		}
		// Any address embedding a closed IPv4 address is closed too.
		if v4, _, ok := Embedded(a); ok {
			if _, c4 := g.Check(v4, 80, nil); c4 && !closed {
				t.Fatalf("%s embeds %s, which is closed, but is open", a, v4)
			}
		}
		// Every address is closed by a rule-less guard or opened by
		// naming it exactly.
		if closed {
			p := netip.PrefixFrom(a, a.BitLen())
			if c2, still := g.Check(a, 80, func(c Closure) bool { return c.Opens(a, p, 80) }); still {
				t.Fatalf("%s named exactly on its port is still closed by %+v", a, c2)
			}
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	g := New(Options{})
	addrs := []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("2606:4700::1111"), netip.MustParseAddr("64:ff9b::a9fe:a9fe"), netip.MustParseAddr("10.0.5.3")}
	g.Check(addrs[0], 443, nil)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Check(addrs[i%len(addrs)], 443, nil)
	}
}

// BenchmarkRefresh is the cost of one re-read of the host's addresses and
// the kit's ports, paid at most once per MaxAge.
func BenchmarkRefresh(b *testing.B) {
	g := New(Options{})
	for b.Loop() {
		g.Refresh()
	}
}
