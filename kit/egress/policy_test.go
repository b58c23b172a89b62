package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// testNets are where the test names resolve: documentation ranges, which
// the table closes, opened for the tests as an allow rule would.
var testNets = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("198.51.100.0/24")}

// testGuard is the guard of the tests: the system's addresses and ports,
// with the test networks open.
var testGuard = netguard.New(netguard.Options{Open: testNets})

// fakeDNS is a resolver with fixed answers: the seam that lets a test
// make a name resolve to any address without a DNS server.
func fakeDNS(m map[string][]string) Resolver {
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		as, ok := m[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		var out []netip.Addr
		for _, a := range as {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	dns := fakeDNS(map[string][]string{
		"api.anthropic.com":         {"160.79.104.10"},
		"raw.githubusercontent.com": {"185.199.108.133"},
		"githubusercontent.com":     {"185.199.108.134"},
		"pypi.org":                  {"151.101.0.223"},
		"evil.example":              {"203.0.113.5"},
		"rebind.example":            {"169.254.169.254"},
		"local.example":             {"127.0.0.1"},
		"mixed.example":             {"203.0.113.6", "10.1.2.3"},
		"internal.example":          {"10.1.2.3"},
		"mapped.example":            {"::ffff:169.254.169.254"},
	})
	pol, err := NewPolicy(protocol.NetworkSpec{
		Default: "deny",
		Allow:   []string{"api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "10.0.0.0/8", "rebind.example", "local.example", "evil.example"},
		Deny:    []string{"evil.example", "10.9.0.0/16"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host    string
		port    int
		verdict string
		rule    string
	}{
		{"api.anthropic.com", 443, Allow, "api.anthropic.com"},
		{"API.Anthropic.com.", 22, Allow, "api.anthropic.com"},
		{"raw.githubusercontent.com", 443, Allow, "*.githubusercontent.com"},
		{"githubusercontent.com", 443, Deny, `default = "deny"`},
		{"pypi.org", 443, Allow, "pypi.org:443"},
		{"pypi.org", 80, Deny, `default = "deny"`},
		{"evil.example", 443, Deny, "evil.example"},
		{"rebind.example", 80, Deny, "built-in: cloud metadata"},
		{"local.example", 80, Deny, "built-in: loopback"},
		{"mapped.example", 80, Deny, "built-in: cloud metadata"},
		{"internal.example", 5432, Allow, "10.0.0.0/8"},
		{"mixed.example", 80, Deny, `default = "deny"`},
		{"10.1.2.3", 80, Allow, "10.0.0.0/8"},
		{"10.9.1.1", 80, Deny, "10.9.0.0/16"},
		{"169.254.169.254", 80, Deny, "built-in: cloud metadata"},
		{"fd00:ec2::254", 80, Deny, "built-in: cloud metadata"},
		{"::1", 80, Deny, "built-in: loopback"},
		{"127.0.0.1", 8080, Deny, "built-in: loopback"},
		{"0.0.0.0", 8080, Deny, "built-in: unspecified (this network)"},
		{"nowhere.example", 80, Fail, ""},
		{"bad_host!", 80, Deny, "built-in: host names"},
	}
	for _, tt := range tests {
		d := pol.Decide(context.Background(), testGuard, dns, tt.host, tt.port)
		if d.Verdict != tt.verdict || d.Rule != tt.rule {
			t.Errorf("Decide(%s, %d) = %s by %q (%s), want %s by %q", tt.host, tt.port, d.Verdict, d.Rule, d.Reason, tt.verdict, tt.rule)
		}
	}

	// An explicit address rule opens a built-in range; a name rule does not.
	open, err := NewPolicy(protocol.NetworkSpec{Default: "allow", Allow: []string{"169.254.169.254", "[fd00:ec2::254]:80"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		host    string
		port    int
		verdict string
	}{{"169.254.169.254", 80, Allow}, {"rebind.example", 80, Allow}, {"fd00:ec2::254", 80, Allow}, {"fd00:ec2::254", 81, Deny}, {"local.example", 80, Deny}, {"evil.example", 80, Allow}} {
		if d := open.Decide(context.Background(), testGuard, dns, tt.host, tt.port); d.Verdict != tt.verdict {
			t.Errorf("allow-default Decide(%s, %d) = %s by %q, want %s", tt.host, tt.port, d.Verdict, d.Rule, tt.verdict)
		}
	}
}

func TestNewPolicyErrors(t *testing.T) {
	t.Parallel()
	_, err := NewPolicy(protocol.NetworkSpec{Default: "maybe", Allow: []string{"*.*.example.com", "a b", "host:99999", "10.0.0.0/33", "fe80::1"}, Deny: []string{"ok.example", "x:"}})
	if err == nil {
		t.Fatal("NewPolicy accepted bad rules")
	}
	for _, want := range []string{`default "maybe"`, `allow[0]`, `allow[1]`, `allow[2]`, `allow[3]`, `deny[1]`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewPolicy error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "allow[4]") {
		t.Errorf("NewPolicy rejected the address fe80::1:\n%v", err)
	}
}

func FuzzParseEgressRule(f *testing.F) {
	for _, s := range []string{"api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "10.0.0.0/8", "[fd00::/8]:443", "[::1]:80", "1.2.3.4:22", "*", "::ffff:10.0.0.0/104", "a..b", "[", "x:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := protocol.ParseEgressRule(s)
		if err != nil {
			return
		}
		if (r.Host == "") == !r.Prefix.IsValid() {
			t.Fatalf("ParseEgressRule(%q) = %+v: want exactly one of a host and a prefix", s, r)
		}
		if r.Port < 0 || r.Port > 65535 {
			t.Fatalf("ParseEgressRule(%q) port %d", s, r.Port)
		}
		pol, err := NewPolicy(protocol.NetworkSpec{Default: "deny", Allow: []string{s}})
		if err != nil {
			t.Fatalf("NewPolicy rejects the rule ParseEgressRule accepts, %q: %v", s, err)
		}
		pol.Decide(context.Background(), testGuard, fakeDNS(nil), "x.example", 443)
	})
}

// FuzzDecide: whatever the host's spelling, the rule and the port, an
// allowed decision dials only addresses the table leaves open or the
// rule opens, and a host that is an address is decided as that address.
func FuzzDecide(f *testing.F) {
	for _, s := range [][2]string{
		{"2852039166", "10.0.0.0/8"}, {"0251.0376.0251.0376", "169.254.169.254"}, {"0xa9fea9fe", "*"},
		{"169.254.43518", "0.0.0.0/0"}, {"[64:ff9b::a9fe:a9fe]", "64:ff9b::/96"}, {"2002:a9fe:a9fe::", "2002::/16"},
		{"db.internal", "10.0.5.0/24:5432"}, {"::ffff:127.0.0.1", "127.0.0.1:80"}, {"fe80::1%eth0", "fe80::/10"},
	} {
		f.Add(s[0], s[1], uint16(80))
	}
	g := netguard.New(netguard.Options{Ports: func() ([]int, error) { return []int{8080}, nil }})
	// Names resolve to addresses made from their bytes, closed or not.
	resolve := func(ctx context.Context, host string) ([]netip.Addr, error) {
		var b [16]byte
		copy(b[:], host)
		return []netip.Addr{netip.AddrFrom16(b).Unmap(), netip.AddrFrom4([4]byte(b[:4]))}, nil
	}
	f.Fuzz(func(t *testing.T, host, rule string, port uint16) {
		pol, err := NewPolicy(protocol.NetworkSpec{Default: "allow", Allow: []string{rule}})
		if err != nil {
			pol, _ = NewPolicy(protocol.NetworkSpec{})
		}
		if port == 0 {
			port = 80
		}
		d := pol.Decide(context.Background(), g, resolve, host, int(port))
		if !d.Allowed() {
			if d.Reason == "" || d.Rule == "" && d.Verdict != Fail {
				t.Fatalf("Decide(%q, %q) = %+v: a refusal says why", host, rule, d)
			}
			return
		}
		if a, ok := netguard.ParseHost(normHost(host)); ok && (len(d.Addrs) != 1 || d.Addrs[0] != a) {
			t.Fatalf("Decide(%q) dials %v, want %v", host, d.Addrs, a)
		}
		r, _ := protocol.ParseEgressRule(rule)
		for _, a := range d.Addrs {
			if c, closed := g.Check(a, int(port), func(c netguard.Closure) bool {
				return err == nil && r.Host == "" && (r.Port == 0 || r.Port == int(port)) && c.Opens(a, r.Prefix, r.Port)
			}); closed {
				t.Fatalf("Decide(%q, rule %q, port %d) allowed %s, which is %s", host, rule, port, a, c)
			}
		}
	})
}

// BenchmarkDecide is the policy's cost per connection, the table
// included, for an address and for a name (the resolver a map lookup).
//
//	go test -run '^$' -bench Decide ./kit/egress
func BenchmarkDecide(b *testing.B) {
	dns := fakeDNS(map[string][]string{"api.example.com": {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"}})
	pol, err := NewPolicy(protocol.NetworkSpec{Default: "deny", Allow: []string{"*.example.com", "10.0.5.0/24:5432", "pypi.org:443"}, Deny: []string{"evil.example.com"}})
	if err != nil {
		b.Fatal(err)
	}
	g := netguard.New(netguard.Options{})
	for _, host := range []string{"93.184.215.14", "0xa9fea9fe", "10.0.5.3", "api.example.com"} {
		b.Run(host, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pol.Decide(context.Background(), g, dns, host, 5432)
			}
		})
	}
}
