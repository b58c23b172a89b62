package generator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// network decodes [network]: the box's egress policy.
func (d *doc) network(path string, v any, c *Config) {
	m, ok := d.table(path, v, "default", "allow", "deny", "ask", "ask_timeout")
	if !ok {
		return
	}
	n := &protocol.NetworkSpec{Default: protocol.NetworkAllow}
	if x, ok := m["default"]; ok {
		if s, ok := d.str(path+".default", x); ok {
			if s != protocol.NetworkAllow && s != protocol.NetworkDeny {
				d.errorf(path+".default", "%q is neither \"allow\" nor \"deny\"", s)
			}
			n.Default = s
		}
	}
	rules := func(k string) []string {
		x, ok := m[k]
		if !ok {
			return nil
		}
		list, _ := d.strList(path+"."+k, x)
		seen := map[string]bool{}
		var out []string
		for i, s := range list {
			p := fmt.Sprintf("%s.%s[%d]", path, k, i)
			if _, err := protocol.ParseEgressRule(s); err != nil {
				d.errorf(p, "%s", strings.TrimPrefix(err.Error(), "egress rule "))
				continue
			}
			if seen[s] {
				d.errorf(p, "%q is listed twice", s)
				continue
			}
			seen[s] = true
			out = append(out, s)
		}
		return out
	}
	n.Allow = rules("allow")
	n.Deny = rules("deny")
	if x, ok := m["ask"]; ok {
		n.Ask, _ = d.boolean(path+".ask", x)
	}
	if x, ok := m["ask_timeout"]; ok {
		if s, ok := d.str(path+".ask_timeout", x); ok {
			if _, err := protocol.ParseDuration(s); err != nil {
				d.errorf(path+".ask_timeout", "%s (e.g. \"60s\", \"5m\")", err)
			} else if !n.Ask {
				d.errorf(path+".ask_timeout", "ask_timeout is set but ask is not: set ask = true, or remove ask_timeout")
			} else {
				n.AskTimeout = s
			}
		}
	}
	c.Network = n
}

// inject decodes env.X.inject = { hosts = [...], header = "..." }: the
// secret reaches agents only as a placeholder, and the egress proxy puts
// the real value into requests to hosts.
func (d *doc) inject(path string, v any, spec protocol.EnvSpec) *protocol.InjectSpec {
	m, ok := d.table(path, v, "hosts", "header", "port")
	if !ok {
		return nil
	}
	in := &protocol.InjectSpec{}
	if !spec.Secret {
		d.errorf(path, "inject needs secret = true: a brokered value is a secret")
	}
	if x, ok := m["hosts"]; ok {
		hosts, _ := d.strList(path+".hosts", x)
		for i, h := range hosts {
			if err := protocol.CheckHostName(h); err != nil || h != strings.ToLower(h) {
				d.errorf(fmt.Sprintf("%s.hosts[%d]", path, i), "%q is not a lower-case host name: name the exact hosts the secret is sent to, e.g. \"api.anthropic.com\" (no wildcards, ports or addresses)", h)
				continue
			}
			in.Hosts = append(in.Hosts, h)
		}
	}
	if len(in.Hosts) == 0 {
		d.errorf(path+".hosts", "name at least one host the secret is sent to, e.g. hosts = [\"api.anthropic.com\"]")
	}
	if x, ok := m["header"]; ok {
		if s, ok := d.str(path+".header", x); ok {
			in.Header = s
			if (&protocol.InjectSpec{Hosts: []string{"x"}, Header: s}).Check() != nil {
				d.errorf(path+".header", "%q is not an HTTP header name, e.g. \"x-api-key\"", s)
			}
		}
	}
	if x, ok := m["port"]; ok {
		if n, ok := d.integer(path+".port", x); ok {
			if n < 1 || n > 65535 {
				d.errorf(path+".port", "%d is not a TCP port: the HTTPS port the secret is sent to, 1 to 65535 (default 443)", n)
			} else if n != protocol.InjectPort {
				in.Port = n
			}
		}
	}
	return in
}

// injectReachable reports a brokered secret whose host the [network]
// policy blocks on its port (443 unless inject.port says): it could never be sent.
func (d *doc) injectReachable(c *Config) {
	n := c.Network
	if n == nil {
		return
	}
	var allow, deny []protocol.EgressRule
	addrAllow := false
	for _, s := range n.Allow {
		r, _ := protocol.ParseEgressRule(s)
		allow = append(allow, r)
		addrAllow = addrAllow || r.Host == ""
	}
	for _, s := range n.Deny {
		r, _ := protocol.ParseEgressRule(s)
		deny = append(deny, r)
	}
	match := func(r protocol.EgressRule, host string, port int) bool {
		if r.Host == "" || (r.Port != 0 && r.Port != port) {
			return false
		}
		if rest, ok := strings.CutPrefix(r.Host, "*"); ok {
			return rest == "" || strings.HasSuffix(host, rest)
		}
		return r.Host == host
	}
	for _, name := range c.EnvOrder {
		in := c.Env[name].Inject
		if in == nil {
			continue
		}
		port := in.Port
		if port == 0 {
			port = protocol.InjectPort
		}
		for i, h := range in.Hosts {
			p := fmt.Sprintf("%s.inject.hosts[%d]", joinPath("env", []string{name}), i)
			blocked := ""
			for _, r := range deny {
				if match(r, h, port) {
					blocked = fmt.Sprintf("network.deny has %q", r.Text)
					break
				}
			}
			if blocked == "" && n.Default == protocol.NetworkDeny && !addrAllow && !slices.ContainsFunc(allow, func(r protocol.EgressRule) bool { return match(r, h, port) }) {
				blocked = fmt.Sprintf("network.default is \"deny\" and no allow rule names it: add %q to network.allow", h)
			}
			if blocked != "" {
				d.errorf(p, "the secret could never be sent to %q: %s", h, blocked)
			}
		}
	}
}
