package egress

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestRequestRulesClients: a host limited by a request rule answers the
// requests the rule allows and refuses the rest with a readable 451
// naming the rule, for real curl, python3 and node clients, over HTTPS
// (the proxy terminates it with the box CA, no secret involved) and
// plain HTTP; and every ambiguous spelling of a path outside the rule is
// refused before it reaches the upstream.
func TestRequestRulesClients(t *testing.T) {
	o := startOutside(t)
	rule := protocol.RequestRule{Host: "api.outside.test", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}
	// The default allows everything: the request rule still limits its host.
	b := startBox(t, o, protocol.NetworkSpec{Default: "allow", AllowRequests: []protocol.RequestRule{rule}})
	https := fmt.Sprintf("https://api.outside.test:%d", o.httpsPort)
	plain := fmt.Sprintf("http://api.outside.test:%d", o.httpPort)
	curl := func(t *testing.T, args ...string) (int, string) {
		t.Helper()
		out, errOut, err := b.run(t, "curl", append([]string{"-sS", "--path-as-is", "-o", "-", "-w", "\n%{http_code}"}, args...)...)
		if err != nil {
			t.Fatalf("curl %v: %v %s", args, err, errOut)
		}
		i := strings.LastIndexByte(out, '\n')
		var code int
		fmt.Sscan(out[i+1:], &code)
		return code, out[:i]
	}
	for _, base := range []string{https, plain} {
		t.Run(base[:5], func(t *testing.T) {
			before := o.count()
			if code, body := curl(t, base+"/repos/acme/widgets"); code != 200 || !strings.Contains(body, "hello from") {
				t.Fatalf("allowed GET = %d %q", code, body)
			}
			if o.count() != before+1 {
				t.Fatal("the allowed request did not reach the upstream")
			}
			for _, tt := range []struct{ method, path string }{
				{"POST", "/repos/acme/widgets"},
				{"get", "/repos/acme/widgets"},
				{"GET", "/repos/other/widgets"},
				{"GET", "/repos/acme"},
				{"GET", "/repos/acme-evil/x"},
				{"GET", "/repos/ACME/x"},
				{"GET", "/repos/acme/../other/x"},
				{"GET", "/repos/acme/%2e%2e/other/x"},
				{"GET", "/repos/acme/%2E%2E%2Fother"},
				{"GET", "/repos/acme/..%2fother"},
				{"GET", "/repos/acme/%252e%252e/other"},
				{"GET", "/repos/acme/..;/other"},
				{"GET", "/repos/acme/x;y"},
				{"GET", "//repos/acme/x"},
				{"GET", "/repos/acme//x"},
				{"GET", "/repos/acme/%5c..%5cother"},
				{"GET", "/repos/acme/%00"},
				{"GET", "/repos/acme/%c0%ae%c0%ae/x"},
			} {
				code, body := curl(t, "-X", tt.method, base+tt.path)
				if code != 451 || !strings.Contains(body, "glovebox: the connection to api.outside.test") {
					t.Errorf("%s %s = %d %q, want 451", tt.method, tt.path, code, body)
				}
				if !strings.Contains(body, "ambiguous paths") && !strings.Contains(body, rule.String()) {
					t.Errorf("%s %s: the 451 does not name the rule: %q", tt.method, tt.path, body)
				}
			}
			if o.count() != before+1 {
				t.Errorf("%d refused requests reached the upstream", o.count()-before-1)
			}
		})
	}
	t.Run("body", func(t *testing.T) {
		_, body := curl(t, "-X", "POST", https+"/repos/acme/widgets")
		want := `allow = [{ host = "api.outside.test", methods = ["POST"], paths = ["/repos/acme/widgets"] }]`
		if !strings.Contains(body, want) {
			t.Errorf("the 451 does not say how to allow it (%s):\n%s", want, body)
		}
	})
	t.Run("socks", func(t *testing.T) {
		// A SOCKS tunnel to a limited host is terminated the same way.
		socks := []string{"--proxy", "socks5h://" + b.addr}
		if code, _ := curl(t, append(socks, https+"/repos/acme/x")...); code != 200 {
			t.Errorf("allowed GET over SOCKS = %d", code)
		}
		if code, body := curl(t, append(socks, https+"/repos/other/x")...); code != 451 || !strings.Contains(body, rule.String()) {
			t.Errorf("GET of another path over SOCKS = %d %q, want 451", code, body)
		}
	})
	t.Run("python", func(t *testing.T) {
		script := `import sys, urllib.request, urllib.error
for u in sys.argv[1:]:
    try:
        print(urllib.request.urlopen(u, timeout=20).status)
    except urllib.error.HTTPError as e:
        print(e.code)
`
		out, errOut, err := b.run(t, "python3", "-c", script, https+"/repos/acme/x", https+"/repos/other/x", plain+"/repos/other/x")
		if err != nil || strings.Fields(out)[0] != "200" || strings.Fields(out)[1] != "451" || strings.Fields(out)[2] != "451" {
			t.Errorf("python = %v %q %q, want 200 451 451", err, out, errOut)
		}
	})
	t.Run("node", func(t *testing.T) {
		script := `const http = require("http"), tls = require("tls");
const proxy = new URL(process.env.HTTPS_PROXY);
async function get(u) {
  const target = new URL(u);
  return new Promise((resolve, reject) => {
    const req = http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target.host});
    req.on("connect", (res, sock) => {
      if (res.statusCode !== 200) return resolve("connect " + res.statusCode);
      const s = tls.connect({socket: sock, servername: target.hostname}, () => {
        s.write("GET " + target.pathname + " HTTP/1.1\r\nHost: " + target.host + "\r\nConnection: close\r\n\r\n");
      });
      let body = ""; s.on("data", d => body += d); s.on("end", () => resolve(body.split("\r\n")[0]));
      s.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}
(async () => { for (const u of process.argv.slice(1)) console.log(await get(u)); })();
`
		out, errOut, err := b.run(t, "node", "-e", script, https+"/repos/acme/x", https+"/repos/other/x")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if err != nil || len(lines) != 2 || !strings.Contains(lines[0], " 200 ") || !strings.Contains(lines[1], " 451 ") {
			t.Errorf("node = %v %q %q, want 200 then 451", err, out, errOut)
		}
	})
	// Another port of the host is limited too (the rule names no port),
	// and a host no request rule names is a plain tunnel.
	t.Run("other hosts", func(t *testing.T) {
		if code, _ := curl(t, fmt.Sprintf("http://outside.test:%d/anything", o.httpPort)); code != 200 {
			t.Errorf("a host no request rule names = %d", code)
		}
	})
}

// TestSessionRules: a session's own rules narrow the box's policy, widen
// it only within session_may_allow, never past a deny rule or a closed
// address, and apply to the next connection at once.
func TestSessionRules(t *testing.T) {
	t.Parallel()
	dns := fakeDNS(map[string][]string{
		"outside.test": {"203.0.113.10"}, "api.outside.test": {"203.0.113.11"}, "pypi.test": {"203.0.113.12"},
		"blocked.test": {"203.0.113.14"}, "other.test": {"198.51.100.20"}, "rebind.test": {"169.254.169.254"},
		"notlisted.test": {"203.0.113.16"},
	})
	box, err := NewPolicy(protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test", "api.outside.test"},
		Deny: []string{"blocked.test"}, SessionMayAllow: []string{"pypi.test", "blocked.test", "rebind.test", "198.51.100.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	sess := func(spec protocol.NetworkSpec) *Policy {
		t.Helper()
		p, err := NewSessionPolicy(spec)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		sess *Policy
		host string
		want string // verdict, then the rule
	}{
		{"no session rules", nil, "outside.test", "allow outside.test"},
		{"no session rules, may_allow is not an allow", nil, "pypi.test", `deny default = "deny"`},
		{"narrowed by default deny", sess(protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}}), "api.outside.test", `deny session: default = "deny"`},
		{"narrowed keeps what it names", sess(protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}}), "outside.test", "allow outside.test"},
		{"narrowed by a deny rule", sess(protocol.NetworkSpec{Deny: []string{"*.outside.test"}}), "api.outside.test", "deny session: *.outside.test"},
		{"session default allow is the box's", sess(protocol.NetworkSpec{Deny: []string{"x.test"}}), "pypi.test", `deny default = "deny"`},
		{"widened within may_allow", sess(protocol.NetworkSpec{Allow: []string{"pypi.test"}}), "pypi.test", "allow session: pypi.test"},
		{"widened by a wildcard within may_allow", sess(protocol.NetworkSpec{Allow: []string{"*"}}), "pypi.test", "allow session: *"},
		{"widened by address within may_allow", sess(protocol.NetworkSpec{Allow: []string{"198.51.100.20"}}), "other.test", "allow session: 198.51.100.20"},
		{"not past may_allow", sess(protocol.NetworkSpec{Allow: []string{"*"}}), "notlisted.test", `deny default = "deny"`},
		{"not past a box deny rule", sess(protocol.NetworkSpec{Allow: []string{"blocked.test"}}), "blocked.test", "deny blocked.test"},
		{"not past a closed address", sess(protocol.NetworkSpec{Allow: []string{"rebind.test", "169.254.169.254"}}), "rebind.test", "deny built-in: cloud metadata"},
	}
	for _, tt := range tests {
		d := box.DecideSession(context.Background(), testGuard, dns, tt.sess, tt.host, 443)
		if got := d.Verdict + " " + d.Rule; got != tt.want {
			t.Errorf("%s: %s = %q (%s), want %q", tt.name, tt.host, got, d.Reason, tt.want)
		}
	}
	if _, err := NewSessionPolicy(protocol.NetworkSpec{SessionMayAllow: []string{"x.test"}}); err == nil {
		t.Error("a session's rules took session_may_allow")
	}
	if p, err := NewSessionPolicy(protocol.NetworkSpec{}); p != nil || err != nil {
		t.Errorf("empty session rules = %v, %v, want none", p, err)
	}
	// Request rules of a session narrow a host the box allows.
	s := sess(protocol.NetworkSpec{AllowRequests: []protocol.RequestRule{{Host: "outside.test", Methods: []string{"GET"}}}})
	d := box.DecideSession(context.Background(), testGuard, dns, s, "outside.test", 443)
	if !d.Allowed() || !d.inspect {
		t.Fatalf("a host a session's request rule names = %+v, want allowed and inspected", d)
	}
	rs := rules{box: box, sess: s}
	if d := rs.request("outside.test", 443, "POST", "/x"); d.Allowed() || !strings.HasPrefix(d.Rule, "session: ") {
		t.Errorf("POST on a GET-only session rule = %+v", d)
	}
	if d := rs.request("outside.test", 443, "GET", "/x"); !d.Allowed() {
		t.Errorf("GET on a GET-only session rule = %+v", d)
	}
	// Inside a terminated tunnel a CONNECT has no path: never a match.
	wide := rules{box: box, sess: sess2(t, protocol.RequestRule{Host: "outside.test"})}
	if d := wide.request("outside.test", 443, "CONNECT", ""); d.Allowed() {
		t.Errorf("CONNECT inside an inspected tunnel = %+v, want refused", d)
	}
	if d := wide.request("outside.test", 443, "OPTIONS", "*"); d.Allowed() {
		t.Errorf("OPTIONS * = %+v, want refused", d)
	}
}

// TestSessionRulesLive: through the real proxy with curl, a session's
// rules set while it runs apply to the next connection.
func TestSessionRulesLive(t *testing.T) {
	o := startOutside(t)
	b := startBox(t, o, protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}, SessionMayAllow: []string{"api.outside.test"}})
	get := func(host string) (int, string) {
		t.Helper()
		out, errOut, err := b.run(t, "curl", "-sS", "-o", "-", "-w", "\n%{http_code}", fmt.Sprintf("http://%s:%d/x", host, o.httpPort))
		if err != nil {
			t.Fatalf("curl: %v %s", err, errOut)
		}
		i := strings.LastIndexByte(out, '\n')
		var code int
		fmt.Sscan(out[i+1:], &code)
		return code, out[:i]
	}
	if code, _ := get("api.outside.test"); code != 451 {
		t.Fatalf("before the session's rules: %d, want 451", code)
	}
	p, _ := NewSessionPolicy(protocol.NetworkSpec{Allow: []string{"api.outside.test"}})
	b.rules.Set(p)
	if code, body := get("api.outside.test"); code != 200 {
		t.Fatalf("widened within session_may_allow: %d %s", code, body)
	}
	p, _ = NewSessionPolicy(protocol.NetworkSpec{Default: "deny"})
	b.rules.Set(p)
	code, body := get("outside.test")
	if code != 451 || !strings.Contains(body, "this session's own egress rules") || !strings.Contains(body, `session: default = "deny"`) {
		t.Fatalf("narrowed: %d %s", code, body)
	}
	b.rules.Set(nil)
	if code, _ := get("outside.test"); code != 200 {
		t.Fatalf("rules cleared: %d", code)
	}
}

func sess2(t *testing.T, rs ...protocol.RequestRule) *Policy {
	t.Helper()
	p, err := NewSessionPolicy(protocol.NetworkSpec{AllowRequests: rs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
