package egress

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Policy decides which connections leave the box. Build one with
// NewPolicy; a Policy is immutable, so SetPolicy swaps it whole.
type Policy struct {
	spec     protocol.NetworkSpec
	allow    []protocol.EgressRule
	deny     []protocol.EgressRule
	requests []requestRule
	mayAllow []protocol.EgressRule // session_may_allow
	deflt    string
	session  bool // a session's rule set, not a box's policy
}

// requestRule is a parsed protocol.RequestRule.
type requestRule struct {
	protocol.RequestRule
	host protocol.EgressRule
	text string
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
	p.spec.SessionMayAllow = slices.Clone(spec.SessionMayAllow)
	p.spec.AllowRequests = cloneRequests(spec.AllowRequests)
	for _, s := range spec.Allow {
		r, _ := protocol.ParseEgressRule(s)
		p.allow = append(p.allow, r)
	}
	for _, s := range spec.Deny {
		r, _ := protocol.ParseEgressRule(s)
		p.deny = append(p.deny, r)
	}
	for _, s := range spec.SessionMayAllow {
		r, _ := protocol.ParseEgressRule(s)
		p.mayAllow = append(p.mayAllow, r)
	}
	for _, rr := range p.spec.AllowRequests {
		h, _ := protocol.ParseEgressRule(rr.Host)
		p.requests = append(p.requests, requestRule{RequestRule: rr, host: h, text: rr.String()})
	}
	return p, nil
}

// NewSessionPolicy parses a session's own rule set. Its default "allow"
// means "what the box's policy allows"; "deny" means only what its allow
// rules name (and the box allows, or its session_may_allow covers). An
// empty spec (no default, no rules) means no session rules: nil.
func NewSessionPolicy(spec protocol.NetworkSpec) (*Policy, error) {
	if err := spec.CheckSession(); err != nil {
		return nil, fmt.Errorf("session egress rules: %w", err)
	}
	if spec.Default == "" && len(spec.Allow) == 0 && len(spec.Deny) == 0 && len(spec.AllowRequests) == 0 {
		return nil, nil
	}
	p, err := NewPolicy(spec)
	if err != nil {
		return nil, err
	}
	p.session = true
	return p, nil
}

func cloneRequests(rs []protocol.RequestRule) []protocol.RequestRule {
	if rs == nil {
		return nil
	}
	out := make([]protocol.RequestRule, len(rs))
	for i, r := range rs {
		out[i] = protocol.RequestRule{Host: r.Host, Methods: slices.Clone(r.Methods), Paths: slices.Clone(r.Paths)}
	}
	return out
}

// Spec returns the spec the policy was built from, with its default
// filled in.
func (p *Policy) Spec() protocol.NetworkSpec {
	s := p.spec
	s.Allow = append([]string{}, s.Allow...)
	s.Deny = append([]string{}, s.Deny...)
	s.SessionMayAllow = slices.Clone(s.SessionMayAllow)
	s.AllowRequests = cloneRequests(s.AllowRequests)
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
	// byDefault: the policy's default decided (no rule matched).
	byDefault bool
	// inspect: request rules name the host and port, so each request
	// on the connection is decided (HTTPS is terminated to read them).
	inspect bool
	// method and path of a request a request rule decided.
	method, path string
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
	return rules{box: p}.decide(ctx, g, resolve, host, port)
}

// DecideSession is Decide for a session whose own rule set is sess (nil
// for none): see rules.
func (p *Policy) DecideSession(ctx context.Context, g *netguard.Guard, resolve Resolver, sess *Policy, host string, port int) Decision {
	return rules{box: p, sess: sess}.decide(ctx, g, resolve, host, port)
}

// rules are the rules in force for one session: the box's policy and
// the session's own rule set (nil for none). A connection goes ahead
// when both allow it; or when the box's policy denies it only by its
// default (no deny rule, no closed address), the session's rules allow
// it by an allow rule, and the box's session_may_allow covers it. So a
// session's rules narrow the box's policy freely and widen it only as
// far as the box's session_may_allow, never past a deny rule or the
// addresses closed by default (unless the box's own allow rules open
// them). Request rules of both apply: a request must pass each that
// inspects its host.
type rules struct {
	box, sess *Policy
}

func (v rules) decide(ctx context.Context, g *netguard.Guard, resolve Resolver, host string, port int) Decision {
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
		if d, denied := v.box.denyName(host, port); denied {
			return d
		}
		if v.sess != nil {
			if d, denied := v.sess.denyName(host, port); denied {
				return sessionDeny(d)
			}
		}
	}
	var addrs []netip.Addr
	if isName {
		// Decided without a lookup: a denied name is not even resolved.
		if !v.box.mayAllowName(host, port) && (v.sess == nil || !v.box.maySessionName(host, port)) {
			return v.box.defaultDeny(target)
		}
		if v.sess != nil && !v.sess.mayAllowName(host, port) {
			return sessionDeny(v.sess.defaultDeny(target))
		}
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
	return v.decideAddrs(g, host, isName, port, addrs)
}

// decideAddrs is decide once the addresses are known: it also re-checks
// a kept-alive upstream connection against the rules in force.
func (v rules) decideAddrs(g *netguard.Guard, host string, isName bool, port int, addrs []netip.Addr) Decision {
	bd := v.box.decideAddrs(g, host, isName, port, addrs)
	if v.sess == nil || bd.Verdict == Fail {
		return bd
	}
	// The box's guard already checked the addresses: the session's rules
	// only narrow, or widen within session_may_allow, by name and range.
	sd := v.sess.decideAddrs(nil, host, isName, port, addrs)
	if bd.Allowed() {
		if !sd.Allowed() {
			return sessionDeny(sd)
		}
		bd.inspect = bd.inspect || sd.inspect
		return bd
	}
	if bd.byDefault && sd.Allowed() && !sd.byDefault {
		if m := v.box.sessionMay(host, isName, port, addrs); m != "" {
			sd.Rule = "session: " + sd.Rule
			sd.Reason += fmt.Sprintf(" (this session's rules, within the box's session_may_allow %q)", m)
			return sd
		}
	}
	return bd
}

// sessionMay names the box's session_may_allow rule that covers the
// connection, "" when none does.
func (p *Policy) sessionMay(host string, isName bool, port int, addrs []netip.Addr) string {
	for _, r := range p.mayAllow {
		if isName && matchName(r, host, port) {
			return r.Text
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	for _, r := range p.mayAllow {
		all := r.Host == ""
		for _, a := range addrs {
			all = all && matchAddr(r, a, port)
		}
		if all {
			return r.Text
		}
	}
	return ""
}

// maySessionName reports whether session_may_allow could cover a
// connection to the name host: a name rule matching it, or an address
// rule once it is resolved.
func (p *Policy) maySessionName(host string, port int) bool {
	for _, r := range p.mayAllow {
		if r.Host == "" || matchName(r, host, port) {
			return true
		}
	}
	return false
}

// sessionDeny marks a denial as the session's rules'.
func sessionDeny(d Decision) Decision {
	d.Rule = "session: " + d.Rule
	d.Reason += " (this session's own egress rules, set by the app that opened it)"
	d.byDefault = false
	return d
}

func (p *Policy) defaultDeny(target string) Decision {
	return Decision{Verdict: Deny, Rule: `default = "deny"`, byDefault: true, Reason: fmt.Sprintf("no allow rule matches %s and the default is deny", target)}
}

// inspects reports whether request rules name host:port.
func (p *Policy) inspects(host string, port int) bool {
	for _, r := range p.requests {
		if matchName(r.host, host, port) {
			return true
		}
	}
	return false
}

// decideRequest decides one request on a connection to host:port the
// policy inspects: allowed when a request rule naming the host allows
// method on path (a CleanRequestPath result).
func (p *Policy) decideRequest(host string, port int, method, path string) Decision {
	var names []string
	for _, r := range p.requests {
		if !matchName(r.host, host, port) {
			continue
		}
		if r.Match(method, path) {
			return Decision{Verdict: Allow, Rule: r.text, Reason: fmt.Sprintf("%s %s on %s matches the allow rule %s", method, path, hostPort(host, port), r.text)}
		}
		names = append(names, r.text)
	}
	rule := strings.Join(names, ", ")
	return Decision{Verdict: Deny, Rule: rule, inspect: true, method: method, path: path,
		Reason: fmt.Sprintf("%s %s on %s: the host is limited by the request rules %s, and none allows this method and path", method, path, hostPort(host, port), rule)}
}

// request decides one request on an inspected connection: the path must
// be unambiguous, and every rule set that inspects the host must allow
// it.
func (v rules) request(host string, port int, method, escapedPath string) Decision {
	if escapedPath == "" && method != "CONNECT" {
		escapedPath = "/" // http://host with no path asks for /
	}
	path, err := protocol.CleanRequestPath(escapedPath)
	if err != nil {
		return Decision{Verdict: Deny, Rule: "built-in: ambiguous paths", inspect: true,
			Reason: fmt.Sprintf("%s %s: %v; request rules limit this host, so such a path is refused", method, hostPort(host, port), err)}
	}
	d := Decision{Verdict: Allow}
	if v.box.inspects(host, port) {
		if d = v.box.decideRequest(host, port, method, path); !d.Allowed() {
			return d
		}
	}
	if v.sess != nil && v.sess.inspects(host, port) {
		sd := v.sess.decideRequest(host, port, method, path)
		if !sd.Allowed() {
			return sessionDeny(sd)
		}
		if d.Rule == "" {
			d = sd
		}
	}
	return d
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
	if p.deflt == protocol.NetworkAllow || p.inspects(host, port) {
		return true
	}
	for _, r := range p.allow {
		if r.Host == "" || matchName(r, host, port) {
			return true
		}
	}
	return false
}

// decideAddrs is Decide once the addresses are known. A nil g checks no
// closed addresses (a session's rules, after the box's).
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
		if g == nil {
			continue
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
		for _, r := range p.requests {
			if matchName(r.host, host, port) {
				return Decision{Verdict: Allow, Rule: r.text, Addrs: addrs, inspect: true,
					Reason: fmt.Sprintf("%s is limited to the requests its request rules allow", target)}
			}
		}
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
		return Decision{Verdict: Allow, Rule: `default = "allow"`, Addrs: addrs, byDefault: true, Reason: fmt.Sprintf("%s is allowed by default", target)}
	}
	d := p.defaultDeny(target)
	d.Addrs = addrs
	return d
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
