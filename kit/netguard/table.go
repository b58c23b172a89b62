package netguard

import (
	"fmt"
	"net/netip"
)

// Class groups the rows by who may open them.
type Class int

// Classes of rows.
const (
	// Host is this machine: loopback and the host's own addresses. The url
	// adapter's allow_loopback_urls opens it.
	Host Class = iota + 1
	// Private is RFC 1918, 100.64.0.0/10 and fc00::/7: networks the box
	// may sit on. The url adapter's allow_private_urls opens it.
	Private
	// Kit is the kit's own listening ports on this machine.
	Kit
	// Special is everything else: link-local, metadata, multicast,
	// documentation, benchmarking, reserved. Only a rule naming the
	// address or its range opens it.
	Special
)

func (c Class) String() string {
	switch c {
	case Host:
		return "host"
	case Private:
		return "private"
	case Kit:
		return "kit"
	case Special:
		return "special"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Row is one closed range of the table.
type Row struct {
	Prefix netip.Prefix
	// What names the range in a sentence: "loopback", "cloud metadata".
	What  string
	Class Class
}

// rows is the table. The most specific rows come first: the first row
// holding an address names it, and an address is closed by every row
// holding it that its caller has not opened.
var rows = []Row{
	// Cloud metadata services: AWS, GCP, Azure, Oracle and others at
	// 169.254.169.254; AWS's IPv6 endpoint; Azure's wire server; Alibaba.
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata", Special},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata", Special},
	{netip.MustParsePrefix("168.63.129.16/32"), "cloud metadata", Special},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata", Special},

	{netip.MustParsePrefix("127.0.0.0/8"), "loopback", Host},
	{netip.MustParsePrefix("::1/128"), "loopback", Host},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this network)", Special},
	{netip.MustParsePrefix("::/128"), "unspecified", Special},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local", Special},
	{netip.MustParsePrefix("fe80::/10"), "link-local", Special},

	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)", Private},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)", Private},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)", Private},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)", Private},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private IPv6)", Private},

	{netip.MustParsePrefix("224.0.0.0/4"), "multicast", Special},
	{netip.MustParsePrefix("ff00::/8"), "multicast", Special},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast", Special},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4)", Special},

	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (192.0.0.0/24)", Special},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)", Special},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)", Special},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)", Special},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (deprecated)", Special},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (RFC 2544)", Special},

	{netip.MustParsePrefix("100::/64"), "discard-only (RFC 6666)", Special},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (RFC 8215)", Special},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (2001::/23: Teredo, benchmarking, ORCHID)", Special},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (2001:db8::/32)", Special},
	{netip.MustParsePrefix("3fff::/20"), "documentation (3fff::/20)", Special},
	{netip.MustParsePrefix("5f00::/16"), "segment routing (RFC 9602)", Special},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)", Special},
}

// Rows returns the table: the fixed rows, most specific first. The
// host's own addresses (class Host) and the kit's own ports (class Kit)
// are rows too, read from the system by a Guard.
func Rows() []Row { return append([]Row(nil), rows...) }

// Embedding prefixes: an IPv6 address in one of them carries an IPv4
// address, and is closed when that address is.
var (
	compat4 = netip.MustParsePrefix("::/96")          // IPv4-compatible, ::a.b.c.d
	nat64   = netip.MustParsePrefix("64:ff9b::/96")   // NAT64 well-known prefix
	nat64l  = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64 local use, judged as /96 as well
	sixTo4  = netip.MustParsePrefix("2002::/16")      // 6to4, the IPv4 address in bits 16-47
)

// Embedded returns the IPv4 address an IPv6 address carries, and how:
// IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d, but not ::
// or ::1), NAT64 (64:ff9b::a.b.c.d, and 64:ff9b:1::a.b.c.d) or 6to4
// (2002:aabb:ccdd::). ok is false for any other address.
func Embedded(a netip.Addr) (v4 netip.Addr, how string, ok bool) {
	if !a.Is6() {
		return netip.Addr{}, "", false
	}
	a = a.WithZone("")
	b := a.As16()
	last := netip.AddrFrom4([4]byte(b[12:16]))
	switch {
	case a.Is4In6():
		return a.Unmap(), "IPv4-mapped", true
	case compat4.Contains(a):
		if a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
			return netip.Addr{}, "", false
		}
		return last, "IPv4-compatible", true
	case nat64.Contains(a):
		return last, "NAT64 (64:ff9b::/96)", true
	case nat64l.Contains(a):
		return last, "local-use NAT64 (64:ff9b:1::/48)", true
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4 (2002::/16)", true
	}
	return netip.Addr{}, "", false
}

// Closure says why an address is closed.
type Closure struct {
	// Row is the row that closes it. For the host's own addresses its
	// Prefix is the single address; for the kit's own ports it is the
	// address too, and Port is set.
	Row
	// Port is the kit's port, for a Kit closure.
	Port int
	// Addr is the address the row holds: the one checked, or the IPv4
	// address it embeds.
	Addr netip.Addr
	// Via says how an embedded address was spelled ("NAT64
	// (64:ff9b::/96)"), "" when Addr is the address checked.
	Via string
}

// String says it in a clause: "169.254.169.254 is cloud metadata".
func (c Closure) String() string {
	s := c.Addr.String() + " is "
	if c.Class == Kit {
		return fmt.Sprintf("%s:%d is %s", c.Addr, c.Port, c.What)
	}
	s += c.What
	if c.Via != "" {
		s += ", spelled as " + c.Via
	}
	return s
}

// Opens reports whether a rule for the range p on port (0 for every
// port) names the address or the range of c, and so opens it: p holds
// c.Addr (or the address as spelled, a) and is no wider than the row.
// A Kit closure opens only to a rule naming its port.
func (c Closure) Opens(a netip.Addr, p netip.Prefix, port int) bool {
	if !p.IsValid() {
		return false
	}
	if c.Class == Kit && port != c.Port {
		return false
	}
	a = a.WithZone("")
	if p.Bits() == p.Addr().BitLen() && p.Addr() == a.Unmap() {
		return true // the address as spelled, named exactly
	}
	return p.Addr().BitLen() == c.Prefix.Addr().BitLen() && p.Bits() >= c.Prefix.Bits() && p.Contains(c.Addr)
}

// fixed returns every fixed row closing a (itself or the IPv4 address it
// embeds).
func fixed(a netip.Addr, out []Closure) []Closure {
	a = a.WithZone("").Unmap()
	for _, r := range rows {
		if r.Prefix.Contains(a) {
			out = append(out, Closure{Row: r, Addr: a})
		}
	}
	if v4, how, ok := Embedded(a); ok {
		for _, r := range rows {
			if r.Prefix.Contains(v4) {
				out = append(out, Closure{Row: r, Addr: v4, Via: how + " " + a.String()})
			}
		}
	}
	return out
}
