package netguard

import (
	"net"
	"net/netip"
	"slices"
	"testing"
)

// TestSystem reads the real system: this host's addresses are closed, and
// a port this process listens on is the kit's own.
func TestSystem(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ports, err := listeningPorts()
	if err != nil || !slices.Contains(ports, port) {
		t.Fatalf("listeningPorts() = %v, %v; want %d among them", ports, err, port)
	}
	// Both ways of listing them: netlink, and /proc where it is missing.
	inodes, err := socketInodes()
	if err != nil {
		t.Fatal(err)
	}
	for name, list := range map[string]func(map[string]bool) ([]int, error){"sock_diag": diagListening, "/proc": procListening} {
		if ports, err := list(inodes); err != nil || !slices.Contains(ports, port) {
			t.Errorf("%s: %v, %v; want %d among them", name, ports, err, port)
		}
	}
	g := New(Options{})
	c, closed := g.Check(netip.MustParseAddr("127.0.0.1"), port, func(c Closure) bool { return c.Class == Host })
	if !closed || c.Class != Kit {
		t.Errorf("Check(loopback, own port) = %+v, %v; want the kit's own port", c, closed)
	}
	addrs, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if c, closed := g.Check(a, 1, nil); !closed {
			t.Errorf("Check(%s, an address of this host) = open", a)
		} else if c.Addr != a.WithZone("") && !a.IsLinkLocalUnicast() {
			t.Errorf("Check(%s) = %+v", a, c)
		}
	}
}
