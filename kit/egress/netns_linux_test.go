package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// testNet is a network namespace the test made, joined to this host by a
// veth pair in a /24 of 198.19.0.0/16 (benchmarking addresses): Host is
// the host's end (an address of this host), Peer the test host's.
type testNet struct {
	ns, hostIf, peerIf string
	subnet             netip.Prefix
	Host, Peer         netip.Addr
	// The same in IPv6, in 2001:2::/48 (benchmarking too).
	subnet6      netip.Prefix
	Host6, Peer6 netip.Addr
}

func run(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newTestNet makes the namespace and the pair, and removes them when the
// test ends.
func newTestNet(t testing.TB) *testNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the egress address tests make a network namespace and a veth pair: run them as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("the egress address tests need ip (iproute2)")
	}
	var id [4]byte
	rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	// A /24 of 198.19.0.0/16 this host has no address in.
	mine, _ := net.InterfaceAddrs()
	third := int(binary.BigEndian.Uint16(id[:2]))%250 + 2
	for ; ; third = third%250 + 2 {
		used := false
		for _, a := range mine {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.To4()[0] == 198 && n.IP.To4()[1] == 19 && int(n.IP.To4()[2]) == third {
				used = true
			}
		}
		if !used {
			break
		}
	}
	n := &testNet{ns: "gbxeg-" + tag, hostIf: "gbe" + tag, subnet: netip.MustParsePrefix(fmt.Sprintf("198.19.%d.0/24", third))}
	n.Host = netip.MustParseAddr(fmt.Sprintf("198.19.%d.1", third))
	n.Peer = netip.MustParseAddr(fmt.Sprintf("198.19.%d.2", third))
	n.subnet6 = netip.MustParsePrefix(fmt.Sprintf("2001:2:0:%x::/64", third))
	n.Host6 = netip.MustParseAddr(fmt.Sprintf("2001:2:0:%x::1", third))
	n.Peer6 = netip.MustParseAddr(fmt.Sprintf("2001:2:0:%x::2", third))
	peerIf := "gbp" + tag
	n.peerIf = peerIf
	run(t, "ip", "netns", "add", n.ns)
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", n.hostIf).Run()
		exec.Command("ip", "netns", "del", n.ns).Run()
	})
	run(t, "ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", peerIf)
	run(t, "ip", "link", "set", peerIf, "netns", n.ns)
	run(t, "ip", "addr", "add", n.Host.String()+"/24", "dev", n.hostIf)
	run(t, "ip", "link", "set", n.hostIf, "up")
	run(t, "ip", "-n", n.ns, "addr", "add", n.Peer.String()+"/24", "dev", peerIf)
	run(t, "ip", "-n", n.ns, "link", "set", peerIf, "up")
	run(t, "ip", "-n", n.ns, "link", "set", "lo", "up")
	run(t, "ip", "addr", "add", n.Host6.String()+"/64", "dev", n.hostIf, "nodad")
	run(t, "ip", "-n", n.ns, "addr", "add", n.Peer6.String()+"/64", "dev", peerIf, "nodad")
	return n
}

// listen opens a TCP listener inside the namespace: a socket stays in
// the namespace it was made in, so a thread that joined it makes it.
func (n *testNet) listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/var/run/netns/" + n.ns)
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("join %s: %w", n.ns, err)
			return
		}
		ln, err = net.Listen("tcp", addr)
		// A thread that cannot go back stays locked and ends with the
		// goroutine.
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("listen in the namespace: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveHello answers every request on ln with "hello from <name>".
func serveHello(t testing.TB, ln net.Listener, name string) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+name+"\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
}

// helloPort serves hello from name on ln and returns its port.
func helloPort(t testing.TB, ln net.Listener, name string) int {
	t.Helper()
	serveHello(t, ln, name)
	return ln.Addr().(*net.TCPAddr).Port
}

// listenHere listens on addr in the test's own network namespace.
func listenHere(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// dialLog is the proxy's dialer in these tests: it dials loopback and the
// test network for real, and records and refuses anything else, so that
// a row that failed to close an address shows as a dial here, never as
// traffic.
type dialLog struct {
	net  netip.Prefix // invalid: dial nothing for real
	net6 netip.Prefix
	mu   sync.Mutex
	out  []string
}

func (d *dialLog) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.out = append(d.out, addr)
	d.mu.Unlock()
	if d.net.IsValid() && (ap.Addr().IsLoopback() || d.net.Contains(ap.Addr()) || d.net6.Contains(ap.Addr())) {
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}
	return nil, errors.New("test dialer: refusing an address outside the test")
}

func (d *dialLog) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.out
	d.out = nil
	return out
}

// through sends one request to target through the proxy at addr by way,
// "http" (forward), "connect" or "socks", and returns the HTTP status the
// agent reads (SOCKS: 200 when the tunnel opened, 451 when not allowed by
// ruleset, 502 otherwise) and the body or block message.
func through(t *testing.T, addr, way, host string, port int) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		hp = "[" + host + "]:" + strconv.Itoa(port)
	}
	get := func() (int, string) {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s %s: read the answer in the tunnel: %v", way, hp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	switch way {
	case "http":
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", hp, hp)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("forward %s: %v", hp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	case "connect":
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatalf("CONNECT %s: %v", hp, err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		return get()
	case "socks":
		h := strings.Trim(host, "[]")
		req := []byte{5, 1, 0, 5, 1, 0}
		if a, err := netip.ParseAddr(h); err == nil && a.Is4() && a.String() == h {
			req = append(append(req, 1), a.AsSlice()...)
		} else if err == nil && a.Is6() {
			req = append(append(req, 4), a.AsSlice()...)
		} else {
			req = append(append(req, 3, byte(len(h))), h...)
		}
		req = binary.BigEndian.AppendUint16(req, uint16(port))
		c.Write(req)
		var rep [12]byte
		if _, err := io.ReadFull(br, rep[:12]); err != nil {
			t.Fatalf("SOCKS %s: %v", hp, err)
		}
		switch rep[3] {
		case 0:
			return get()
		case 2:
			return 451, "connection not allowed by ruleset"
		}
		return 502, fmt.Sprintf("SOCKS reply %d", rep[3])
	}
	t.Fatalf("no way %q", way)
	return 0, ""
}

var ways = []string{"http", "connect", "socks"}

// addrBox is a proxy on the real system's table, with the test network
// and a recording dialer.
type addrBox struct {
	*box
	dl    *dialLog
	clock atomic.Int64 // the guard's clock, seconds
}

func startAddrBox(t *testing.T, tn *testNet, kitPort int, spec protocol.NetworkSpec) *addrBox {
	t.Helper()
	ab := &addrBox{dl: &dialLog{net: tn.subnet, net6: tn.subnet6}} // a zero subnet dials nothing
	ab.clock.Store(1e9)
	g := netguard.New(netguard.Options{
		// The kit's own port is the one the test names: every listener of
		// this process would be, and the tests' loopback servers are in it.
		Ports: func() ([]int, error) { return []int{kitPort}, nil },
		Now:   func() time.Time { return time.Unix(ab.clock.Load(), 0) },
	})
	ab.box = startBoxWith(t, spec, Options{Guard: g, Dial: ab.dl.dial, Resolve: fakeDNS(addrDNS)})
	return ab
}

// addrDNS are names that resolve to closed addresses (DNS rebinding).
var addrDNS = map[string][]string{
	"rebind-metadata.test": {"169.254.169.254"},
	"rebind-nat64.test":    {"64:ff9b::a9fe:a9fe"},
	"rebind-private.test":  {"10.0.5.3"},
	"rebind-mixed.test":    {"8.8.8.8", "127.0.0.1"},
	"db.internal.test":     {"10.0.5.3"},
}

// TestAddressTableReal: through the real proxy, on its three paths, with
// real dials: the test host in a namespace is closed (benchmarking) until
// a rule opens its range; the host's own addresses stay closed under that
// rule, also one added after the proxy started, until named; loopback is
// closed until opened, and the kit's own port on it until the rule names
// the port.
func TestAddressTableReal(t *testing.T) {
	tn := newTestNet(t)
	peerPort := helloPort(t, tn.listen(t, tn.Peer.String()+":0"), "the test host")
	peer6Port := helloPort(t, tn.listen(t, "["+tn.Peer6.String()+"]:0"), "the test host")
	own6Port := helloPort(t, listenHere(t, "["+tn.Host6.String()+"]:0"), "this host")
	ownPort := helloPort(t, listenHere(t, tn.Host.String()+":0"), "this host")
	loPort := helloPort(t, listenHere(t, "127.0.0.1:0"), "loopback")
	kitPort := helloPort(t, listenHere(t, "127.0.0.1:0"), "the kit")

	subnet := tn.subnet.String()
	tests := []struct {
		name  string
		allow []string
		host  string
		port  int
		want  string // "" for reached, else the built-in rule
	}{
		{"test host, benchmarking closed", nil, tn.Peer.String(), peerPort, "benchmarking (RFC 2544)"},
		{"test host opened by its range", []string{subnet}, tn.Peer.String(), peerPort, ""},
		{"test host opened by its range and port", []string{subnet + ":" + strconv.Itoa(peerPort)}, tn.Peer.String(), peerPort, ""},
		{"test host, a wider rule opens nothing", []string{"0.0.0.0/0", "198.0.0.0/8"}, tn.Peer.String(), peerPort, "benchmarking (RFC 2544)"},
		{"test host, inet_aton spelling", nil, fmt.Sprint(binary.BigEndian.Uint32(tn.Peer.AsSlice())), peerPort, "benchmarking (RFC 2544)"},
		{"test host, IPv4-mapped", nil, "::ffff:" + tn.Peer.String(), peerPort, "benchmarking (RFC 2544)"},
		{"this host's address", []string{subnet}, tn.Host.String(), ownPort, "an address of this host"},
		{"test host, IPv6 benchmarking closed", nil, tn.Peer6.String(), peer6Port, "IETF protocol assignments (2001::/23: Teredo, benchmarking, ORCHID)"},
		{"test host, IPv6 opened by its range", []string{"[" + tn.subnet6.String() + "]:" + strconv.Itoa(peer6Port)}, tn.Peer6.String(), peer6Port, ""},
		{"this host's IPv6 address", []string{tn.subnet6.String()}, tn.Host6.String(), own6Port, "an address of this host"},
		{"this host's address, named", []string{subnet, tn.Host.String() + ":" + strconv.Itoa(ownPort)}, tn.Host.String(), ownPort, ""},
		{"loopback", nil, "127.0.0.1", loPort, "loopback"},
		{"loopback opened", []string{"127.0.0.0/8"}, "127.0.0.1", loPort, ""},
		{"loopback, IPv4-compatible", []string{"10.0.0.0/8"}, "::127.0.0.1", loPort, "loopback"},
		{"the kit's port", []string{"127.0.0.0/8"}, "127.0.0.1", kitPort, "the kit's own port"},
		{"the kit's port, named", []string{"127.0.0.1:" + strconv.Itoa(kitPort)}, "127.0.0.1", kitPort, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startAddrBox(t, tn, kitPort, protocol.NetworkSpec{Default: "allow", Allow: tt.allow})
			for _, way := range ways {
				code, body := through(t, b.addr, way, tt.host, tt.port)
				if tt.want == "" {
					if code != 200 || !strings.Contains(body, "hello from") {
						t.Errorf("%s %s:%d = %d %q, want it reached", way, tt.host, tt.port, code, body)
					}
					continue
				}
				if code != 451 || (way != "socks" && !strings.Contains(body, "built-in: "+tt.want)) {
					t.Errorf("%s %s:%d = %d %q, want 451 by built-in: %s", way, tt.host, tt.port, code, body, tt.want)
				}
			}
			if d := b.dl.take(); tt.want != "" && len(d) > 0 {
				t.Errorf("the proxy dialled %v", d)
			}
		})
	}

	t.Run("an address the host gains later", func(t *testing.T) { checkLateHostAddress(t, tn, kitPort) })
}

// checkLateHostAddress: an address of the test host that this host takes
// later is closed as this host's once the proxy's table is re-read.
func checkLateHostAddress(t *testing.T, tn *testNet, kitPort int) {
	b := startAddrBox(t, tn, kitPort, protocol.NetworkSpec{Default: "allow", Allow: []string{tn.subnet.String()}})
	late := tn.subnet.Addr().Next().Next().Next() // .3, the test host's first
	run(t, "ip", "-n", tn.ns, "addr", "add", late.String()+"/24", "dev", tn.peerIf, "nodad")
	latePort := helloPort(t, tn.listen(t, late.String()+":0"), "the test host")
	code, body := through(t, b.addr, "http", late.String(), latePort)
	if code != 200 {
		t.Fatalf("before this host had %s: %d %q", late, code, body)
	}
	// Now this host takes the address (and the namespace gives it up).
	run(t, "ip", "-n", tn.ns, "addr", "del", late.String()+"/24", "dev", tn.peerIf)
	run(t, "ip", "addr", "add", late.String()+"/24", "dev", tn.hostIf)
	minePort := helloPort(t, listenHere(t, late.String()+":0"), "this host")
	b.clock.Add(2) // past MaxAge: the next check re-reads
	code, body = through(t, b.addr, "http", late.String(), minePort)
	if code != 451 || !strings.Contains(body, "an address of this host") {
		t.Errorf("after this host took %s: %d %q, want 451 as an address of this host", late, code, body)
	}
}

// TestAddressTableRows: every row of the table closes its addresses on
// the proxy's three paths, in every spelling, by address and by a name
// that resolves there, and an allow rule naming the address opens it (the
// proxy then dials exactly that address, which the test's dialer refuses
// without sending anything).
func TestAddressTableRows(t *testing.T) {
	tn := &testNet{} // no namespace: nothing here is dialled for real
	tests := []struct {
		host, what, open string
	}{
		{"169.254.169.254", "cloud metadata", "169.254.169.254"},
		{"fd00:ec2::254", "cloud metadata", "fd00:ec2::254"},
		{"168.63.129.16", "cloud metadata", "168.63.129.16"},
		{"100.100.100.200", "cloud metadata", "100.100.100.200"},
		{"0.0.0.0", "unspecified (this network)", "0.0.0.0/8"},
		{"::", "unspecified", "::/128"},
		{"169.254.10.1", "link-local", "169.254.0.0/16"},
		{"fe80::1", "link-local", "fe80::/10"},
		{"10.0.5.3", "private (RFC 1918)", "10.0.5.0/24:80"},
		{"172.20.0.1", "private (RFC 1918)", "172.16.0.0/12"},
		{"192.168.7.7", "private (RFC 1918)", "192.168.7.7"},
		{"100.64.1.1", "carrier-grade NAT (RFC 6598)", "100.64.0.0/10"},
		{"fd12:3456::1", "unique local (private IPv6)", "[fd12:3456::/32]:80"},
		{"224.0.0.251", "multicast", "224.0.0.0/4"},
		{"ff02::fb", "multicast", "ff00::/8"},
		{"255.255.255.255", "broadcast", "255.255.255.255"},
		{"240.1.2.3", "reserved (240.0.0.0/4)", "240.0.0.0/4"},
		{"192.0.0.8", "IETF protocol assignments (192.0.0.0/24)", "192.0.0.0/24"},
		{"192.0.2.10", "documentation (TEST-NET-1)", "192.0.2.0/24"},
		{"198.51.100.10", "documentation (TEST-NET-2)", "198.51.100.0/24"},
		{"203.0.113.10", "documentation (TEST-NET-3)", "203.0.113.0/24"},
		{"192.88.99.1", "6to4 relay anycast (deprecated)", "192.88.99.0/24"},
		{"198.18.0.9", "benchmarking (RFC 2544)", "198.18.0.0/15"},
		{"100::1", "discard-only (RFC 6666)", "100::/64"},
		{"2001:2::9", "IETF protocol assignments (2001::/23: Teredo, benchmarking, ORCHID)", "2001::/23"},
		{"2001:db8::9", "documentation (2001:db8::/32)", "2001:db8::/32"},
		{"3fff::9", "documentation (3fff::/20)", "3fff::/20"},
		{"5f00::9", "segment routing (RFC 9602)", "5f00::/16"},
		{"fec0::9", "site-local (deprecated)", "fec0::/10"},
		{"64:ff9b:1::808:808", "local-use NAT64 (RFC 8215)", "64:ff9b:1::/48"},
		// Metadata in every spelling.
		{"::ffff:169.254.169.254", "cloud metadata", "169.254.169.254"},
		{"::169.254.169.254", "cloud metadata", "169.254.169.254"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata", "169.254.169.254"},
		{"2002:a9fe:a9fe::1", "cloud metadata", "169.254.169.254"},
		{"64:ff9b::a83f:8110", "cloud metadata", "168.63.129.16"},
		{"2852039166", "cloud metadata", "169.254.169.254"},
		{"0251.0376.0251.0376", "cloud metadata", "169.254.169.254"},
		{"0xa9fea9fe", "cloud metadata", "169.254.169.254"},
		{"169.254.43518", "cloud metadata", "169.254.169.254"},
		{"0x7f.1", "loopback", "127.0.0.0/8"},
		// Names that resolve there.
		{"rebind-metadata.test", "cloud metadata", "169.254.169.254"},
		{"rebind-nat64.test", "cloud metadata", "169.254.169.254"},
		{"rebind-private.test", "private (RFC 1918)", "10.0.0.0/8"},
		{"rebind-mixed.test", "loopback", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.host+" closed", func(t *testing.T) {
			closed := startAddrBox(t, tn, 0, protocol.NetworkSpec{Default: "allow"})
			for _, way := range ways {
				code, body := through(t, closed.addr, way, tt.host, 80)
				if code != 451 || (way != "socks" && !strings.Contains(body, "Rule: built-in: "+tt.what+"\n")) {
					t.Errorf("%s %s = %d, want 451 by built-in: %s:\n%s", way, tt.host, code, tt.what, body)
				}
			}
			if d := closed.dl.take(); len(d) > 0 {
				t.Errorf("%s: the proxy dialled %v", tt.host, d)
			}
		})
		// Opened by the rule the block message suggests, or the range.
		t.Run(tt.host+" opened", func(t *testing.T) {
			opened := startAddrBox(t, tn, 0, protocol.NetworkSpec{Default: "allow", Allow: []string{tt.open}})
			want := []string{}
			if a, ok := netguard.ParseHost(tt.host); ok {
				want = append(want, netip.AddrPortFrom(a, 80).String())
			} else {
				for _, s := range addrDNS[tt.host] {
					want = append(want, netip.AddrPortFrom(netip.MustParseAddr(s), 80).String())
				}
			}
			code, body := through(t, opened.addr, "http", tt.host, 80)
			got := opened.dl.take()
			if code != 502 || !slices.Equal(got, want) {
				t.Errorf("allow = [%q]: http %s = %d %q, dialled %v; want 502 after dialling %v", tt.open, tt.host, code, body, got, want)
			}
		})
	}
}

// TestBlockMessageOpensOnPurpose: a block by the table says how to open
// the address, and for a private one, how to open its network on purpose.
func TestBlockMessageOpensOnPurpose(t *testing.T) {
	b := startAddrBox(t, &testNet{}, 0, protocol.NetworkSpec{Default: "allow"})
	_, got := through(t, b.addr, "http", "db.internal.test", 5432)
	want := `glovebox: the connection to db.internal.test:5432 was blocked by this box's network policy.
Reason: db.internal.test:5432 resolves to 10.0.5.3, and 10.0.5.3 is private (RFC 1918), closed unless an allow rule names the address or its range.
Rule: built-in: private (RFC 1918)
To allow it, change [network] in the box's glovebox.toml (or ask the box's operator to change the policy at runtime):
  [network]
  allow = ["10.0.5.3:5432"]   # this address on this port; to open a private range on purpose (a database on the box's private network), name the range and port: "10.0.5.0/24:5432"
Do not retry this connection unchanged: it will be blocked again.
`
	if got != want {
		t.Errorf("block message:\n%s\nwant:\n%s", got, want)
	}
	_, got = through(t, b.addr, "http", "0xa9fea9fe", 80)
	for _, s := range []string{"Reason: 0xa9fea9fe:80 (169.254.169.254): 169.254.169.254 is cloud metadata", `allow = ["169.254.169.254:80"]`, "# The metadata service hands out the machine's credentials"} {
		if !strings.Contains(got, s) {
			t.Errorf("block message lacks %q:\n%s", s, got)
		}
	}
}
