package egress

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Policy decides which connections leave the box. Build one with
// NewPolicy; a Policy is immutable, so SetPolicy swaps it whole.
type Policy struct {
	spec  protocol.NetworkSpec
	allow []protocol.EgressRule
	deny  []protocol.EgressRule
	deflt string
}

// NewPolicy parses a network spec. Every bad rule is reported, one line
// each.
func NewPolicy(spec protocol.NetworkSpec) (*Policy, error) {
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("egress policy: %w", err)
	}
	p := &Policy{spec: spec, deflt: spec.Default}
	if p.deflt == "" {
		p.deflt = protocol.NetworkAllow
	}
	p.spec.Default = p.deflt
	p.spec.Allow = append([]string{}, spec.Allow...)
	p.spec.Deny = append([]string{}, spec.Deny...)
	for _, s := range spec.Allow {
		r, _ := protocol.ParseEgressRule(s)
		p.allow = append(p.allow, r)
	}
	for _, s := range spec.Deny {
		r, _ := protocol.ParseEgressRule(s)
		p.deny = append(p.deny, r)
	}
	return p, nil
}

// Spec returns the spec the policy was built from, with its default
// filled in.
func (p *Policy) Spec() protocol.NetworkSpec {
	s := p.spec
	s.Allow = append([]string{}, s.Allow...)
	s.Deny = append([]string{}, s.Deny...)
	return s
}

// Verdicts a Decision carries.
const (
	Allow = "allow"
	Deny  = "deny"
	Fail  = "error" // the name did not resolve or the upstream did not answer
)

// Decision is the policy's answer for one connection.
type Decision struct {
	Verdict string
	// Rule is the entry that decided, as written ("*.github.com",
	// `default = "deny"`, or a built-in such as "built-in: link-local").
	Rule string
	// Reason says why, in a sentence an agent can act on.
	Reason string
	// Addrs are the addresses checked, and the ones to dial when allowed.
	Addrs []netip.Addr
	// Asked is the client's answer when the proxy asked about the
	// connection ([network] ask), "" when it did not.
	Asked string
	// closure is what closed the connection, for a "built-in:" rule.
	closure netguard.Closure
}

// Allowed reports whether the connection may go ahead.
func (d Decision) Allowed() bool { return d.Verdict == Allow }

// Resolver looks a host name up. The proxy resolves every name itself
// and dials only the addresses it checked.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// normHost lower-cases a host and drops a trailing dot and IPv6
// brackets.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return h
}

// matchName reports whether a name rule matches host (a normalised name).
func matchName(r protocol.EgressRule, host string, port int) bool {
	if r.Host == "" || (r.Port != 0 && r.Port != port) {
		return false
	}
	switch {
	case r.Host == "*":
		return true
	case strings.HasPrefix(r.Host, "*."):
		return strings.HasSuffix(host, r.Host[1:])
	}
	return r.Host == host
}

// matchAddr reports whether an address rule holds a.
func matchAddr(r protocol.EgressRule, a netip.Addr, port int) bool {
	if r.Host != "" || (r.Port != 0 && r.Port != port) {
		return false
	}
	if r.Prefix.Contains(a) {
		return true
	}
	v4, _, ok := netguard.Embedded(a)
	return ok && r.Prefix.Contains(v4)
}

// Decide decides a connection to host:port. host is a name or an address
// in any spelling the system's resolver takes (2852039166 and 0xa9fea9fe
// are addresses); a name is resolved with resolve and every address it
// gives is checked against the policy and guard's table, so a name that
// resolves to a closed or denied address (DNS rebinding, metadata) is
// denied. An allowed decision's Addrs are the ones to dial.
func (p *Policy) Decide(ctx context.Context, g *netguard.Guard, resolve Resolver, host string, port int) Decision {
	host = normHost(host)
	target := hostPort(host, port)
	if strings.Contains(host, "%") {
		return Decision{Verdict: Deny, Rule: "built-in: zones", Reason: fmt.Sprintf("%s: addresses with a zone are not allowed", target)}
	}
	addr, isAddr := netguard.ParseHost(host)
	isName := !isAddr
	if isName {
		if err := protocol.CheckHostName(host); err != nil {
			return Decision{Verdict: Deny, Rule: "built-in: host names", Reason: fmt.Sprintf("%q is %v", host, err)}
		}
		if d, denied := p.denyName(host, port); denied {
			return d
		}
	}
	var addrs []netip.Addr
	if isName && !p.mayAllowName(host, port) {
		// Decided without a lookup: a denied name is not even resolved.
		return Decision{Verdict: Deny, Rule: `default = "deny"`, Reason: fmt.Sprintf("no allow rule matches %s and the default is deny", target)}
	}
	if isName {
		got, err := resolve(ctx, host)
		if err != nil || len(got) == 0 {
			if err == nil {
				err = fmt.Errorf("no addresses")
			}
			return Decision{Verdict: Fail, Rule: "", Reason: fmt.Sprintf("%s does not resolve: %v", host, err)}
		}
		for _, a := range got {
			addrs = append(addrs, a.Unmap().WithZone(""))
		}
	} else {
		addrs = []netip.Addr{addr}
	}
	return p.decideAddrs(g, host, isName, port, addrs)
}

// denyName checks the name deny rules.
func (p *Policy) denyName(host string, port int) (Decision, bool) {
	for _, r := range p.deny {
		if matchName(r, host, port) {
			return Decision{Verdict: Deny, Rule: r.Text, Reason: fmt.Sprintf("%s matches the deny rule %q (deny always wins)", hostPort(host, port), r.Text)}, true
		}
	}
	return Decision{}, false
}

// mayAllowName reports whether a connection to the name host could be
// allowed: by the default, a name rule, or an address rule once resolved.
func (p *Policy) mayAllowName(host string, port int) bool {
	if p.deflt == protocol.NetworkAllow {
		return true
	}
	for _, r := range p.allow {
		if r.Host == "" || matchName(r, host, port) {
			return true
		}
	}
	return false
}

// decideAddrs is Decide once the addresses are known: it also re-checks a
// kept-alive upstream connection against the policy in force.
func (p *Policy) decideAddrs(g *netguard.Guard, host string, isName bool, port int, addrs []netip.Addr) Decision {
	target := hostPort(host, port)
	if isName {
		if d, denied := p.denyName(host, port); denied {
			d.Addrs = addrs
			return d
		}
	}
	for _, a := range addrs {
		for _, r := range p.deny {
			if matchAddr(r, a, port) {
				return Decision{Verdict: Deny, Rule: r.Text, Addrs: addrs,
					Reason: fmt.Sprintf("%s resolves to %s, which matches the deny rule %q (deny always wins)", target, a, r.Text)}
			}
		}
		c, closed := g.Check(a, port, func(c netguard.Closure) bool {
			for _, r := range p.allow {
				if r.Host == "" && (r.Port == 0 || r.Port == port) && c.Opens(a, r.Prefix, r.Port) {
					return true
				}
			}
			return false
		})
		if closed {
			what := c.String()
			if isName {
				what = fmt.Sprintf("%s resolves to %s, and %s", target, a, what)
			} else if a.String() != host {
				what = fmt.Sprintf("%s (%s): %s", target, a, what)
			}
			return Decision{Verdict: Deny, Rule: "built-in: " + c.What, Addrs: addrs, closure: c,
				Reason: what + ", closed unless an allow rule names the address or its range"}
		}
	}
	if isName {
		for _, r := range p.allow {
			if matchName(r, host, port) {
				return Decision{Verdict: Allow, Rule: r.Text, Addrs: addrs, Reason: fmt.Sprintf("%s matches the allow rule %q", target, r.Text)}
			}
		}
	}
	rule := ""
	for _, a := range addrs {
		rule = ""
		for _, r := range p.allow {
			if matchAddr(r, a, port) {
				rule = r.Text
				break
			}
		}
		if rule == "" {
			break
		}
	}
	if rule != "" {
		return Decision{Verdict: Allow, Rule: rule, Addrs: addrs, Reason: fmt.Sprintf("%s is in the allow rule %q", target, rule)}
	}
	if p.deflt == protocol.NetworkAllow {
		return Decision{Verdict: Allow, Rule: `default = "allow"`, Addrs: addrs, Reason: fmt.Sprintf("%s is allowed by default", target)}
	}
	return Decision{Verdict: Deny, Rule: `default = "deny"`, Addrs: addrs, Reason: fmt.Sprintf("no allow rule matches %s and the default is deny", target)}
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
