package generator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestParseNetwork(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`
[network]
default = "deny"
allow = ["api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "10.0.0.0/8"]
deny  = ["169.254.169.254"]

[env.ANTHROPIC_API_KEY]
required = true
secret = true
inject = { hosts = ["api.anthropic.com"], header = "x-api-key" }

[env.GATEWAY_KEY]
secret = true
inject = { hosts = ["gateway.example.com"], port = 8443 }
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Env["GATEWAY_KEY"].Inject.Port; got != 8443 {
		t.Errorf("inject.port = %d, want 8443", got)
	}
	want := &protocol.NetworkSpec{
		Default: "deny",
		Allow:   []string{"api.anthropic.com", "*.githubusercontent.com", "pypi.org:443", "10.0.0.0/8"},
		Deny:    []string{"169.254.169.254"},
	}
	if diff := cmp.Diff(want, c.Network); diff != "" {
		t.Errorf("Network mismatch (-want +got):\n%s", diff)
	}
	wantEnv := protocol.EnvSpec{Required: true, Secret: true, Inject: &protocol.InjectSpec{Hosts: []string{"api.anthropic.com"}, Header: "x-api-key"}}
	if diff := cmp.Diff(wantEnv, c.Env["ANTHROPIC_API_KEY"]); diff != "" {
		t.Errorf("env mismatch (-want +got):\n%s", diff)
	}
	m := c.Manifest("fp")
	if m.Network != c.Network {
		t.Errorf("Manifest().Network = %v, want the config's", m.Network)
	}
	m.KeyFingerprint = "fp"
	if err := m.Check(); err != nil {
		t.Errorf("manifest does not pass Check: %v", err)
	}
}

func TestParseNetworkErrors(t *testing.T) {
	t.Parallel()
	_, err := Parse("glovebox.toml", []byte(`[network]
default = "block"
allow = ["ok.example", "*.*.example", "ok.example", 7]
deny = ["10.0.0.0/33"]
mode = "strict"

[env.KEY]
inject = { hosts = ["API.example.com"], header = "x key", extra = 1 }

[env.OTHER]
secret = true
inject = { header = "x-api-key" }

[env.PORTED]
secret = true
inject = { hosts = ["api.example.com"], port = 70000 }
`))
	if err == nil {
		t.Fatal("Parse accepted a bad [network]")
	}
	want := []string{
		`glovebox.toml:2: network.default: "block" is neither "allow" nor "deny"`,
		`glovebox.toml:3: network.allow[1]: "*.*.example": not a host name`,
		`glovebox.toml:3: network.allow[2]: "ok.example" is listed twice`,
		`glovebox.toml:3: network.allow[3]: want a rule string such as "api.example.com" or a table`,
		`glovebox.toml:4: network.deny[0]: "10.0.0.0/33": "10.0.0.0/33" is not a CIDR range`,
		`glovebox.toml:5: network.mode: unknown key "mode"`,
		`glovebox.toml:8: env.KEY.inject: inject needs secret = true`,
		`glovebox.toml:8: env.KEY.inject.extra: unknown key "extra"`,
		`glovebox.toml:8: env.KEY.inject.header: "x key" is not an HTTP header name`,
		`glovebox.toml:8: env.KEY.inject.hosts[0]: "API.example.com" is not a lower-case host name`,
		`glovebox.toml:12: env.OTHER.inject.hosts: name at least one host`,
		`glovebox.toml:16: env.PORTED.inject.port: 70000 is not a TCP port`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Parse error lacks %q; got:\n%v", w, err)
		}
	}

	_, err = Parse("glovebox.toml", []byte(`[network]
default = "deny"
allow = ["*.example.com", "other.org:8443"]
deny = ["bad.example.com:443"]

[env.A]
secret = true
inject = { hosts = ["api.example.com", "bad.example.com", "other.org"] }

[env.B]
secret = true
inject = { hosts = ["other.org"], port = 8443 }
`))
	want = []string{
		`glovebox.toml:8: env.A.inject.hosts[1]: the secret could never be sent to "bad.example.com": network.deny has "bad.example.com:443"`,
		`glovebox.toml:8: env.A.inject.hosts[2]: the secret could never be sent to "other.org": network.default is "deny" and no allow rule names it`,
	}
	if err == nil || strings.Contains(err.Error(), "hosts[0]") || strings.Contains(err.Error(), "env.B") {
		t.Errorf("Parse = %v, want errors for hosts[1] and hosts[2] only", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Parse error lacks %q; got:\n%v", w, err)
		}
	}
}

// TestParseNetworkRequestRules: the table form of an allow entry, beside
// the string form, decoded strictly with file:line errors, carried in the
// manifest; session_may_allow; a Basic-form inject.
func TestParseNetworkRequestRules(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`[network]
default = "deny"
allow = [
  "pypi.org",
  { host = "api.github.com", methods = ["GET"], paths = ["/repos/acme/"] },
  { host = "github.com", paths = ["/acme/repo.git"] },
]
session_may_allow = ["*.npmjs.org"]

[env.GITHUB_TOKEN]
secret = true
inject = { hosts = ["github.com"], form = "basic", user = "x-access-token" }
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &protocol.NetworkSpec{
		Default: "deny",
		Allow:   []string{"pypi.org"},
		AllowRequests: []protocol.RequestRule{
			{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/"}},
			{Host: "github.com", Paths: []string{"/acme/repo.git"}},
		},
		SessionMayAllow: []string{"*.npmjs.org"},
	}
	if diff := cmp.Diff(want, c.Network); diff != "" {
		t.Errorf("Network mismatch (-want +got):\n%s", diff)
	}
	if in := c.Env["GITHUB_TOKEN"].Inject; in.Form != "basic" || in.User != "x-access-token" {
		t.Errorf("inject = %+v", in)
	}
	m := c.Manifest("fp")
	m.KeyFingerprint = "fp"
	if err := m.Check(); err != nil {
		t.Errorf("manifest does not pass Check: %v", err)
	}
	if m.Network.AllowRequests[0].Paths[0] != "/repos/acme/" {
		t.Errorf("the manifest lost the request rules: %+v", m.Network)
	}

	_, err = Parse("glovebox.toml", []byte(`[network]
allow = [
  { host = "api.github.com", methods = ["get"] },
  { host = "10.0.0.1", paths = ["/x"] },
  { methods = ["GET"] },
  { host = "a.com", paths = ["repos", "/a/../b", "/a%2fb", "/x;y", "/ok", "/ok"] },
  { host = "a.com", port = 1 },
  { host = "b.com", methods = [] },
]
deny = [{ host = "x.com" }]
session_may_allow = ["bad host"]

[env.T]
secret = true
inject = { hosts = ["github.com"], form = "digest", user = "a:b" }
`))
	if err == nil {
		t.Fatal("Parse accepted bad request rules")
	}
	for _, w := range []string{
		`glovebox.toml:3: network.allow[0].methods[0]: "get" is not an HTTP method`,
		`glovebox.toml:4: network.allow[1].host: "10.0.0.1" is an address`,
		`glovebox.toml:5: network.allow[2]: a rule table needs host`,
		`glovebox.toml:6: network.allow[3].paths[0]: path "repos": want a path starting with /`,
		`glovebox.toml:6: network.allow[3].paths[1]: path "/a/../b": a ".." segment`,
		`glovebox.toml:6: network.allow[3].paths[2]: path "/a%2fb": '%' is not allowed`,
		`glovebox.toml:6: network.allow[3].paths[3]: path "/x;y": ';' is not allowed`,
		`glovebox.toml:6: network.allow[3].paths[5]: "/ok" is listed twice`,
		`glovebox.toml:7: network.allow[4].port: unknown key "port"`,
		`glovebox.toml:8: network.allow[5].methods: an empty list allows nothing`,
		`glovebox.toml:10: network.deny[0]: want a rule string such as "api.example.com", got`,
		`glovebox.toml:11: network.session_may_allow[0]: "bad host"`,
		`glovebox.toml:15: env.T.inject.form: "digest": want "basic"`,
		`glovebox.toml:15: env.T.inject.user: user goes with form = "basic"`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Parse error lacks %q; got:\n%v", w, err)
		}
	}
}
