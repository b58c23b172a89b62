package protocol_test

import (
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestCleanRequestPath(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"/":                         "/",
		"/repos/acme/x":             "/repos/acme/x",
		"/repos/acme/":              "/repos/acme/",
		"/api/v4/projects/acme%2Fx": "/api/v4/projects/acme/x",
		"/a%20b":                    "/a b",
		"/%E2%9C%93":                "/\u2713",
		"/acme/repo.git/info/refs":  "/acme/repo.git/info/refs",
		"/a/.git/b":                 "/a/.git/b",
		"/a/...":                    "/a/...",
	}
	for in, want := range ok {
		got, err := protocol.CleanRequestPath(in)
		if err != nil || got != want {
			t.Errorf("CleanRequestPath(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	// What a security team tries: every one is refused, whatever the rules.
	for _, in := range []string{
		"", "repos/acme", "*",
		"/repos/acme/../other", "/repos/acme/./x", "/repos/acme/..",
		"/repos/acme/%2e%2e/other", "/repos/acme/%2E%2E/other", "/repos/acme/.%2e/other",
		"/repos/acme%2f..%2fother", "/repos/acme%2F%2E%2E%2Fother",
		"/repos/acme/%252e%252e/other", "/repos/acme/%25",
		"//other/repo", "/repos//acme/", "/repos/acme%2F%2Fx",
		"/repos/acme/..;/other", "/repos/acme;x/", "/repos/acme/%3b/x",
		"/repos/acme\\..\\other", "/repos/acme/%5c../other",
		"/repos/acme/%00", "/repos/acme/x%0d%0aHost:evil", "/repos/acme/%7f",
		"/repos/acme/%ff", "/repos/acme/%c0%ae%c0%ae/other",
		"/repos/acme/%", "/repos/acme/%zz", "/a b",
	} {
		if got, err := protocol.CleanRequestPath(in); err == nil {
			t.Errorf("CleanRequestPath(%q) = %q, want an error", in, got)
		}
	}
}

func TestMatchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix, path string
		want         bool
	}{
		{"/repos/acme/", "/repos/acme/x", true},
		{"/repos/acme/", "/repos/acme/", true},
		{"/repos/acme/", "/repos/acme", false},
		{"/repos/acme/", "/repos/acme-evil/x", false},
		{"/repos/acme/", "/repos/ACME/x", false}, // case-sensitive: never a false allow on a case-sensitive server
		{"/repos/acme", "/repos/acme", true},
		{"/repos/acme", "/repos/acme/x", true},
		{"/repos/acme", "/repos/acme-evil", false},
		{"/repos/acme", "/repos/acmex/y", false},
		{"/acme/repo.git", "/acme/repo.git/info/refs", true},
		{"/acme/repo.git", "/acme/repo.git2/info/refs", false},
		{"/", "/anything", true},
	}
	for _, tt := range tests {
		if got := protocol.MatchPath(tt.prefix, tt.path); got != tt.want {
			t.Errorf("MatchPath(%q, %q) = %v, want %v", tt.prefix, tt.path, got, tt.want)
		}
	}
}

func TestRequestRuleCheck(t *testing.T) {
	t.Parallel()
	good := []protocol.RequestRule{
		{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}},
		{Host: "*.github.com:443"},
		{Host: "*", Methods: []string{"GET", "HEAD"}},
		{Host: "github.com", Paths: []string{"/acme/repo.git", "/"}},
	}
	for _, r := range good {
		if err := r.Check(); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	bad := []struct {
		r    protocol.RequestRule
		want string
	}{
		{protocol.RequestRule{Host: "10.0.0.1"}, "not an address"},
		{protocol.RequestRule{Host: ""}, "host"},
		{protocol.RequestRule{Host: "a.com", Methods: []string{"get"}}, "upper-case"},
		{protocol.RequestRule{Host: "a.com", Methods: []string{"GET", "GET"}}, "twice"},
		{protocol.RequestRule{Host: "a.com", Paths: []string{"repos"}}, "starting with /"},
		{protocol.RequestRule{Host: "a.com", Paths: []string{"/a/../b"}}, `".."`},
		{protocol.RequestRule{Host: "a.com", Paths: []string{"/a%2fb"}}, "decoded"},
		{protocol.RequestRule{Host: "a.com", Paths: []string{"/a;b"}}, "not allowed"},
		{protocol.RequestRule{Host: "a.com", Paths: []string{"//a"}}, "empty segment"},
		{protocol.RequestRule{Host: "a.com", Paths: []string{"/a?x=1"}}, "not allowed"},
	}
	for _, tt := range bad {
		err := tt.r.Check()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.r, err, tt.want)
		}
	}
	r := protocol.RequestRule{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}}
	if got, want := r.String(), `{ host = "api.github.com", methods = ["GET"], paths = ["/repos/acme/"] }`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
	if !r.Match("GET", "/repos/acme/x") || r.Match("POST", "/repos/acme/x") || r.Match("GET", "/repos/other/x") {
		t.Error("Match does not follow methods and paths")
	}
}

func TestNetworkSpecSessionAndInject(t *testing.T) {
	t.Parallel()
	n := protocol.NetworkSpec{SessionMayAllow: []string{"pypi.org"}}
	if err := n.Check(); err != nil {
		t.Errorf("box spec with session_may_allow: %v", err)
	}
	if err := n.CheckSession(); err == nil || !strings.Contains(err.Error(), "session_may_allow") {
		t.Errorf("session spec with session_may_allow: %v, want refused", err)
	}
	n = protocol.NetworkSpec{SessionMayAllow: []string{"bad host"}, AllowRequests: []protocol.RequestRule{{Host: "a.com", Methods: []string{"x"}}}}
	err := n.Check()
	if err == nil || !strings.Contains(err.Error(), "session_may_allow[0]") || !strings.Contains(err.Error(), "allow_requests[0]") {
		t.Errorf("Check() = %v, want both problems", err)
	}
	for _, in := range []protocol.InjectSpec{
		{Hosts: []string{"github.com"}, Form: "digest"},
		{Hosts: []string{"github.com"}, User: "x"},
		{Hosts: []string{"github.com"}, Form: "basic", User: "a:b"},
	} {
		if err := in.Check(); err == nil {
			t.Errorf("%+v: no error", in)
		}
	}
	if err := (&protocol.InjectSpec{Hosts: []string{"github.com"}, Form: "basic", User: "oauth2"}).Check(); err != nil {
		t.Error(err)
	}
}

func TestEgressFrames(t *testing.T) {
	t.Parallel()
	m, err := protocol.DecodeClient([]byte(`{"type":"egress","rules":{"default":"deny","allow":["pypi.org"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := m.(*protocol.EgressSet); !ok || e.Rules.Default != "deny" || e.Rules.Allow[0] != "pypi.org" {
		t.Fatalf("decoded %#v", m)
	}
	if _, err := protocol.DecodeClient([]byte(`{"type":"egress"}`)); err == nil {
		t.Error("an egress frame without rules decoded")
	}
	m, err = protocol.DecodeClient([]byte(`{"type":"hello","capabilities":["resume"],"egress":{"deny":["*.evil.com"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := m.(*protocol.ClientHello); h.Egress == nil || h.Egress.Deny[0] != "*.evil.com" {
		t.Fatalf("hello %#v", h)
	}
	b, err := protocol.Encode(&protocol.EgressPolicy{Error: "no"})
	if err != nil || string(b) != `{"type":"egress","error":"no"}` {
		t.Fatalf("Encode = %s, %v", b, err)
	}
	sm, err := protocol.DecodeServer(b)
	if err != nil || sm.(*protocol.EgressPolicy).Error != "no" {
		t.Fatalf("DecodeServer = %#v, %v", sm, err)
	}
}

func FuzzCleanRequestPath(f *testing.F) {
	for _, s := range []string{"/repos/acme/x", "/a/%2e%2e/b", "/a%2f..%2fb", "//x", "/a;b", "/%252e", "/a/./b", "/%c0%ae"} {
		f.Add(s, "/repos/acme/")
	}
	f.Fuzz(func(t *testing.T, escaped, prefix string) {
		p, err := protocol.CleanRequestPath(escaped)
		if err != nil {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.ContainsAny(p, "%;\\") {
			t.Fatalf("CleanRequestPath(%q) = %q: not clean", escaped, p)
		}
		for _, s := range strings.Split(p, "/") {
			if s == "." || s == ".." {
				t.Fatalf("CleanRequestPath(%q) = %q: a dot segment", escaped, p)
			}
		}
		if protocol.CheckRulePath(prefix) != nil {
			return
		}
		if protocol.MatchPath(prefix, p) {
			// A match is a match at a segment boundary.
			if !strings.HasPrefix(p, prefix) {
				t.Fatalf("MatchPath(%q, %q) without the prefix", prefix, p)
			}
			if !strings.HasSuffix(prefix, "/") && len(p) > len(prefix) && p[len(prefix)] != '/' {
				t.Fatalf("MatchPath(%q, %q) inside a segment", prefix, p)
			}
		}
	})
}

func FuzzRequestRule(f *testing.F) {
	f.Add("api.github.com", "GET", "/repos/acme/")
	f.Add("*.x.com:443", "", "/")
	f.Fuzz(func(t *testing.T, host, method, path string) {
		r := protocol.RequestRule{Host: host}
		if method != "" {
			r.Methods = []string{method}
		}
		if path != "" {
			r.Paths = []string{path}
		}
		if r.Check() != nil {
			return
		}
		_ = r.String()
		if path != "" && r.Match(method, path) != (protocol.MatchPath(path, path)) {
			t.Fatalf("%s does not match its own path", r)
		}
	})
}
