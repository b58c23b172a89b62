package protocol_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestParseEgressRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		host string
		pfx  string
		port int
		err  string
	}{
		{in: "api.anthropic.com", host: "api.anthropic.com"},
		{in: "API.Example.COM.", host: "api.example.com"},
		{in: "*.githubusercontent.com", host: "*.githubusercontent.com"},
		{in: "*", host: "*"},
		{in: "pypi.org:443", host: "pypi.org", port: 443},
		{in: "10.0.0.0/8", pfx: "10.0.0.0/8"},
		{in: "10.1.2.3/8", pfx: "10.0.0.0/8"},
		{in: "169.254.169.254", pfx: "169.254.169.254/32"},
		{in: "1.2.3.4:22", pfx: "1.2.3.4/32", port: 22},
		{in: "fd00:ec2::254", pfx: "fd00:ec2::254/128"},
		{in: "[fd00::/8]:443", pfx: "fd00::/8", port: 443},
		{in: "[::1]:80", pfx: "::1/128", port: 80},
		{in: "::ffff:10.0.0.0/104", pfx: "10.0.0.0/8"},
		{in: "", err: "want a host name"},
		{in: " a.com", err: "no spaces"},
		{in: "*.*.com", err: "a * may only be the whole first label"},
		{in: "a*.com", err: "a * may only be the whole first label"},
		{in: "a.com:0", err: "port"},
		{in: "a.com:65536", err: "port"},
		{in: "a.com:", err: "empty port"},
		{in: "10.0.0.0/33", err: "CIDR"},
		{in: "[::1", err: "unclosed"},
		{in: "fe80::1%eth0", err: "zones"},
		{in: "a..com", err: "label"},
	}
	for _, tt := range tests {
		r, err := protocol.ParseEgressRule(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseEgressRule(%q) = %+v, %v, want an error containing %q", tt.in, r, err, tt.err)
			}
			continue
		}
		var pfx netip.Prefix
		if tt.pfx != "" {
			pfx = netip.MustParsePrefix(tt.pfx)
		}
		if err != nil || r.Host != tt.host || r.Prefix != pfx || r.Port != tt.port || r.Text != tt.in {
			t.Errorf("ParseEgressRule(%q) = %+v, %v, want host %q prefix %v port %d", tt.in, r, err, tt.host, pfx, tt.port)
		}
	}
}

func TestManifestCheckNetwork(t *testing.T) {
	t.Parallel()
	m, err := protocol.ParseManifest([]byte(`{"protocol_version":1,
		"env":{"K":{"required":true,"inject":{"hosts":["API.x.com"],"header":"x api"}},
		       "S":{"required":true,"secret":true,"inject":{"hosts":[]}}},
		"network":{"default":"block","allow":["ok.com","bad host"],"deny":["*.*"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = m.Check()
	for _, want := range []string{
		"manifest: env.K.inject needs secret = true",
		`manifest: env.K.inject.hosts[0]: "API.x.com" is not a lower-case host name`,
		`manifest: env.K.inject.header "x api" is not an HTTP header name`,
		"manifest: env.S.inject.hosts: name at least one host",
		`manifest: network.default "block"`,
		`manifest: network.allow[1]`,
		`manifest: network.deny[0]`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check() = %v\nwant a line containing %q", err, want)
		}
	}
}

func TestInjectSpecPort(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		port int
		ok   bool
	}{{0, true}, {443, true}, {8443, true}, {65535, true}, {-1, false}, {65536, false}} {
		err := (&protocol.InjectSpec{Hosts: []string{"api.example.com"}, Port: tt.port}).Check()
		if (err == nil) != tt.ok {
			t.Errorf("InjectSpec{Port: %d}.Check() = %v, want ok %v", tt.port, err, tt.ok)
		}
	}
}
