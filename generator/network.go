package generator

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// network decodes [network]: the box's egress policy.
func (d *doc) network(path string, v any, c *Config) {
	m, ok := d.table(path, v, "default", "allow", "deny", "session_may_allow", "ask", "ask_timeout")
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
	rules := func(k string, tables bool) []string {
		x, ok := m[k]
		if !ok {
			return nil
		}
		list, isList := x.([]any)
		if !isList {
			d.errorf(path+"."+k, "want an array of rules, got %s", tomlType(x))
			return nil
		}
		seen := map[string]bool{}
		var out []string
		for i, e := range list {
			p := fmt.Sprintf("%s.%s[%d]", path, k, i)
			if t, isTable := e.(map[string]any); isTable && tables {
				if r, ok := d.requestRule(p, t); ok {
					if seen[r.String()] {
						d.errorf(p, "%s is listed twice", r)
						continue
					}
					seen[r.String()] = true
					n.AllowRequests = append(n.AllowRequests, r)
				}
				continue
			}
			s, ok := e.(string)
			if !ok {
				if tables {
					d.errorf(p, "want a rule string such as \"api.example.com\" or a table such as { host = \"api.example.com\", methods = [\"GET\"], paths = [\"/v1/\"] }, got %s", tomlType(e))
				} else {
					d.errorf(p, "want a rule string such as \"api.example.com\", got %s", tomlType(e))
				}
				continue
			}
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
	n.Allow = rules("allow", true)
	n.Deny = rules("deny", false)
	n.SessionMayAllow = rules("session_may_allow", false)
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

// requestRule decodes an allow entry's table form: { host = "...",
// methods = [...], paths = [...] }.
func (d *doc) requestRule(path string, v map[string]any) (protocol.RequestRule, bool) {
	m, ok := d.table(path, v, "host", "methods", "paths")
	if !ok {
		return protocol.RequestRule{}, false
	}
	var r protocol.RequestRule
	good := true
	if x, ok := m["host"]; ok {
		if s, ok := d.str(path+".host", x); ok {
			r.Host = s
			if er, err := protocol.ParseEgressRule(s); err != nil {
				d.errorf(path+".host", "%s", strings.TrimPrefix(err.Error(), "egress rule "))
				good = false
			} else if er.Host == "" {
				d.errorf(path+".host", "%q is an address: a rule with methods or paths names a host name (the name the agent connects to)", s)
				good = false
			}
		} else {
			good = false
		}
	} else {
		d.errorf(path, "a rule table needs host, e.g. { host = \"api.github.com\", methods = [\"GET\"], paths = [\"/repos/acme/\"] }")
		good = false
	}
	list := func(k string, check func(string) error, hint string) []string {
		x, ok := m[k]
		if !ok {
			return nil
		}
		vs, ok := d.strList(path+"."+k, x)
		if !ok {
			good = false
			return nil
		}
		if len(vs) == 0 {
			d.errorf(path+"."+k, "an empty list allows nothing: leave %s out to allow every one", k)
			good = false
		}
		for i, s := range vs {
			p := fmt.Sprintf("%s.%s[%d]", path, k, i)
			if err := check(s); err != nil {
				d.errorf(p, "%v%s", err, hint)
				good = false
			} else if slices.Index(vs, s) != i {
				d.errorf(p, "%q is listed twice", s)
				good = false
			}
		}
		return vs
	}
	r.Methods = list("methods", func(s string) error {
		if err := (protocol.RequestRule{Host: "x", Methods: []string{s}}).Check(); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "methods[0]: "))
		}
		return nil
	}, "")
	r.Paths = list("paths", protocol.CheckRulePath, "")
	if good {
		if err := r.Check(); err != nil {
			d.errorf(path, "%v", err)
			good = false
		}
	}
	return r, good
}

// inject decodes env.X.inject = { hosts = [...], header = "..." }: the
// secret reaches agents only as a placeholder, and the egress proxy puts
// the real value into requests to hosts.
func (d *doc) inject(path string, v any, spec protocol.EnvSpec) *protocol.InjectSpec {
	m, ok := d.table(path, v, "hosts", "header", "port", "form", "user")
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
	if x, ok := m["form"]; ok {
		if s, ok := d.str(path+".form", x); ok {
			if s != protocol.InjectFormBasic {
				d.errorf(path+".form", "%q: want \"basic\" (Authorization: Basic user:secret, the form git hosts take), or leave form out for the header and a bearer", s)
			} else {
				in.Form = s
			}
		}
	}
	if x, ok := m["user"]; ok {
		if s, ok := d.str(path+".user", x); ok {
			switch {
			case in.Form != protocol.InjectFormBasic:
				d.errorf(path+".user", "user goes with form = \"basic\"")
			case (&protocol.InjectSpec{Hosts: []string{"x"}, Form: protocol.InjectFormBasic, User: s}).Check() != nil:
				d.errorf(path+".user", "%q: want 1 to 100 printable characters without a colon, e.g. \"x-access-token\" (GitHub) or \"oauth2\" (GitLab)", s)
			default:
				in.User = s
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
	for _, rr := range n.AllowRequests {
		r, _ := protocol.ParseEgressRule(rr.Host)
		allow = append(allow, r)
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
