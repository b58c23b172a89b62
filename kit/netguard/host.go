package netguard

import (
	"net/netip"
	"strconv"
	"strings"
)

// ParseHost parses a URL's or a request's host as the system's resolver
// or curl would before any lookup: an IPv6 address, bracketed or not
// (zones are dropped), an IPv4 address in dotted-decimal, or any of the
// inet_aton forms: one to four parts, each decimal, octal (a leading 0)
// or hex (0x), the last filling the bytes left, so that 2852039166,
// 0xa9fea9fe, 0251.0376.0251.0376 and 169.254.43518 are all
// 169.254.169.254. ok is false for a name.
func ParseHost(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(host, ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if h == "" || len(h) > 64 {
		return netip.Addr{}, false
	}
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals [4]uint64
	for i, p := range parts {
		v, ok := atonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(parts)
	// Every part but the last is one byte; the last fills the rest.
	for i := 0; i < n-1; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	var v uint64
	for i := 0; i < n-1; i++ {
		v |= vals[i] << (8 * (3 - i))
	}
	v |= vals[n-1]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// atonPart parses one part of an inet_aton address.
func atonPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base, digits := 10, p
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	if digits[0] == '+' || digits[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, base, 64)
	if err != nil || v > 0xffffffff {
		return 0, false
	}
	return v, true
}
