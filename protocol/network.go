package protocol

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// NetworkSpec is the box's egress policy (glovebox.toml [network]):
// additive in glovebox.json. Every connection an agent makes leaves
// through the kit's egress proxy, which allows it when an allow rule
// matches and no deny rule does (deny always wins), else applies Default.
type NetworkSpec struct {
	// Default is NetworkAllow or NetworkDeny (empty means allow).
	Default string   `json:"default,omitempty"`
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	// Ask, when true, holds a connection no rule covers (the default
	// would decide it) while the kit asks the session's client through an
	// egress-ask display slot (RendererEgressAsk); no answer within
	// AskTimeout denies it. A session with no client, or no prompt
	// running, decides by the default as before. Additive.
	Ask bool `json:"ask,omitempty"`
	// AskTimeout bounds an ask (ParseDuration's forms; empty means
	// DefaultAskTimeout). Additive.
	AskTimeout string `json:"ask_timeout,omitempty"`
	// AllowRequests are the allow rules with methods and paths
	// (glovebox.toml's table form of an allow entry). Additive.
	AllowRequests []RequestRule `json:"allow_requests,omitempty"`
	// SessionMayAllow lists what a session's own rule set may open
	// beyond this policy (rules as in Allow): a connection this policy
	// denies only by its default is allowed when the session's rules
	// allow it by an allow rule and one of these matches. Deny rules and
	// the addresses closed by default stay closed. Box policies only.
	// Additive.
	SessionMayAllow []string `json:"session_may_allow,omitempty"`
}

// Network defaults.
const (
	NetworkAllow = "allow"
	NetworkDeny  = "deny"
)

// InjectSpec brokers a secret env var: agents get a placeholder in its
// place, and the egress proxy puts the real value into the named header
// (and into an Authorization bearer) of HTTPS requests to Hosts on Port
// only, and removes it from everything those hosts send back.
type InjectSpec struct {
	Hosts  []string `json:"hosts"`
	Header string   `json:"header,omitempty"`
	// Port is the HTTPS port the value is sent to (0 means 443); a
	// connection to another port of the hosts is a plain tunnel that
	// carries only the placeholder. Additive.
	Port int `json:"port,omitempty"`
	// Form is how the value travels: "" (the named header, and an
	// Authorization bearer whose token is the placeholder) or "basic"
	// (an Authorization: Basic header whose user or password is the
	// placeholder becomes Basic base64(User:value), the form git hosts
	// take). Additive.
	Form string `json:"form,omitempty"`
	// User is the Basic user name with Form "basic" (empty means
	// InjectBasicUser). Additive.
	User string `json:"user,omitempty"`
}

// Inject forms.
const (
	InjectFormBasic = "basic"
	// InjectBasicUser is the user name git hosts take with a token as
	// the password (GitHub's convention; GitLab takes "oauth2").
	InjectBasicUser = "x-access-token"
)

// InjectPort is the port brokered secrets go to when InjectSpec.Port is 0.
const InjectPort = 443

// CapEgress announces the egress proxy: /environment carries the policy
// under "network", and sessions get "egress" events.
const CapEgress = "egress"

// EventEgress is the event_type of an egress decision; its data is an
// EgressEvent.
const EventEgress = "egress"

// EgressEvent is one line of a session's egress log, sent as the data of
// an "egress" event on the running prompt.
type EgressEvent struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	// Proto is "http" (a forwarded request), "connect" (a tunnel),
	// "https" (a request inside a brokered tunnel) or "socks".
	Proto    string `json:"proto"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Decision string `json:"decision"` // allow, deny or error
	Rule     string `json:"rule,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// BytesOut went from the agent to the upstream, BytesIn back.
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// Brokered names the secrets put into the request; Stripped the
	// placeholders removed from it because its host may not have them.
	Brokered []string `json:"brokered,omitempty"`
	Stripped []string `json:"stripped,omitempty"`
	// Scrubbed counts the real values removed from the answer of a
	// brokered host (an upstream that echoed one back). Additive.
	Scrubbed int `json:"scrubbed,omitempty"`
	// The audit trail's fields (GET /egress/log). Additive.
	//
	// Seq numbers the box's decisions, from 1, across restarts when the
	// box keeps its audit trail on disk.
	Seq uint64 `json:"seq,omitempty"`
	// Addrs are the addresses the proxy resolved and checked.
	Addrs []string `json:"addrs,omitempty"`
	// Line is the glovebox.toml [network] line the rule is written as
	// (allow = ["api.github.com"], default = "deny"); empty for a
	// built-in rule.
	Line string `json:"line,omitempty"`
	// Ask is the client's answer when the kit asked about the
	// connection: one of the EgressAsk* answers, or "timeout".
	Ask string `json:"ask,omitempty"`
}

// EgressRule is one parsed allow or deny entry:
//
//	api.example.com        a host name, any port
//	*.example.com          any subdomain of example.com (not example.com)
//	*                      every host
//	pypi.org:443           a host on one port
//	10.0.0.0/8, 1.2.3.4    an address range or address, any port
//	[fd00::/8]:443, 1.2.3.4:22, [::1]:80
//
// Names are compared lower-case without a trailing dot.
type EgressRule struct {
	// Text is the entry as written.
	Text string
	// Host is a lower-case name or "*.suffix" or "*"; empty for an
	// address rule.
	Host string
	// Prefix is the address range of an address rule.
	Prefix netip.Prefix
	// Port is the port, 0 for any.
	Port int
}

// ParseEgressRule parses one allow or deny entry.
func ParseEgressRule(s string) (EgressRule, error) {
	r := EgressRule{Text: s}
	t := strings.TrimSpace(s)
	if t == "" || t != s {
		return r, fmt.Errorf("egress rule %q: want a host name, *.domain, an address or a CIDR, with an optional :port, and no spaces", s)
	}
	if len(t) > 300 {
		return r, fmt.Errorf("egress rule %q...: longer than 300 characters", t[:40])
	}
	host, port := t, ""
	if strings.HasPrefix(t, "[") {
		end := strings.Index(t, "]")
		if end < 0 {
			return r, fmt.Errorf("egress rule %q: unclosed [", s)
		}
		host, port = t[1:end], t[end+1:]
		if port != "" {
			p, ok := strings.CutPrefix(port, ":")
			if !ok {
				return r, fmt.Errorf("egress rule %q: want :port after ]", s)
			}
			port = p
			if port == "" {
				return r, fmt.Errorf("egress rule %q: empty port", s)
			}
		}
	} else if i := strings.LastIndexByte(t, ':'); i >= 0 && strings.Count(t, ":") == 1 {
		host, port = t[:i], t[i+1:]
		if port == "" {
			return r, fmt.Errorf("egress rule %q: empty port after the colon", s)
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' || port[0] == '+' {
			return r, fmt.Errorf("egress rule %q: port %q is not a number from 1 to 65535", s, port)
		}
		r.Port = n
	}
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return r, fmt.Errorf("egress rule %q: %q is not a CIDR range such as 10.0.0.0/8 or fd00::/8", s, host)
		}
		if p.Addr().Zone() != "" {
			return r, fmt.Errorf("egress rule %q: zones are not allowed", s)
		}
		r.Prefix = p.Masked()
		if r.Prefix.Addr().Is4In6() {
			r.Prefix = netip.PrefixFrom(r.Prefix.Addr().Unmap(), max(r.Prefix.Bits()-96, 0))
		}
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return r, fmt.Errorf("egress rule %q: zones are not allowed", s)
		}
		a = a.Unmap()
		r.Prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	}
	if strings.Contains(host, ":") {
		return r, fmt.Errorf("egress rule %q: write an IPv6 address with a port as [addr]:port", s)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "*" {
		r.Host = "*"
		return r, nil
	}
	check := name
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		check = rest
	}
	if err := checkHostName(check); err != nil {
		return r, fmt.Errorf("egress rule %q: %w", s, err)
	}
	r.Host = name
	return r, nil
}

// checkHostName checks a DNS name: labels of letters, digits, - and _
// (no wildcard), 1 to 63 characters each, 253 in all.
func checkHostName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("not a host name: want 1 to 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("not a host name: label %q must be 1 to 63 characters (a * may only be the whole first label, as in *.example.com)", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("not a host name: %q has the character %q (a * may only be the whole first label, as in *.example.com)", label, c)
			}
		}
	}
	return nil
}

// CheckHostName reports whether name is a host name egress rules can name.
func CheckHostName(name string) error { return checkHostName(name) }

// Check reports every problem of the network spec, joined.
func (n *NetworkSpec) Check() error {
	var errs []error
	switch n.Default {
	case "", NetworkAllow, NetworkDeny:
	default:
		errs = append(errs, fmt.Errorf("default %q is neither %q nor %q", n.Default, NetworkAllow, NetworkDeny))
	}
	for _, l := range []struct {
		name  string
		rules []string
	}{{"allow", n.Allow}, {"deny", n.Deny}, {"session_may_allow", n.SessionMayAllow}} {
		if len(l.rules) > 10000 {
			errs = append(errs, fmt.Errorf("%s: %d rules, more than 10000", l.name, len(l.rules)))
			continue
		}
		for i, s := range l.rules {
			if _, err := ParseEgressRule(s); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d]: %w", l.name, i, err))
			}
		}
	}
	if n.AskTimeout != "" {
		if _, err := ParseDuration(n.AskTimeout); err != nil {
			errs = append(errs, fmt.Errorf("ask_timeout: %w", err))
		}
	}
	if len(n.AllowRequests) > 10000 {
		errs = append(errs, fmt.Errorf("allow_requests: %d rules, more than 10000", len(n.AllowRequests)))
	} else {
		for i, r := range n.AllowRequests {
			if err := r.Check(); err != nil {
				errs = append(errs, fmt.Errorf("allow_requests[%d] %s: %w", i, r, err))
			}
		}
	}
	return errors.Join(errs...)
}

// CheckSession reports every problem of a session's rule set: a network
// spec without session_may_allow (only the box's policy says what
// sessions may open).
func (n *NetworkSpec) CheckSession() error {
	err := n.Check()
	if len(n.SessionMayAllow) > 0 {
		err = errors.Join(err, errors.New("session_may_allow: only the box's policy (glovebox.toml [network]) says what sessions may open; leave it out of a session's rules"))
	}
	return err
}

// Check reports every problem of an inject spec.
func (in *InjectSpec) Check() error {
	var errs []error
	if len(in.Hosts) == 0 {
		errs = append(errs, errors.New("hosts: name at least one host the secret is sent to, e.g. [\"api.anthropic.com\"]"))
	}
	for i, h := range in.Hosts {
		if err := checkHostName(strings.ToLower(h)); err != nil || h != strings.ToLower(h) {
			errs = append(errs, fmt.Errorf("hosts[%d]: %q is not a lower-case host name (no wildcards, ports or addresses)", i, h))
		}
	}
	if in.Port < 0 || in.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is not a port from 1 to 65535 (leave it out for 443)", in.Port))
	}
	if in.Header != "" && !validHeaderName(in.Header) {
		errs = append(errs, fmt.Errorf("header %q is not an HTTP header name", in.Header))
	}
	switch in.Form {
	case "":
		if in.User != "" {
			errs = append(errs, errors.New("user: a user name goes with form = \"basic\""))
		}
	case InjectFormBasic:
		if in.User != "" && !validBasicUser(in.User) {
			errs = append(errs, fmt.Errorf("user %q: want 1 to 100 printable characters without a colon", in.User))
		}
	default:
		errs = append(errs, fmt.Errorf("form %q: want \"basic\" (Authorization: Basic user:secret, as git hosts take it) or leave it out (the header, and a bearer)", in.Form))
	}
	return errors.Join(errs...)
}

func validHeaderName(s string) bool {
	if len(s) > 100 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return s != ""
}

func validBasicUser(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range s {
		if c < 0x21 || c > 0x7e || c == ':' {
			return false
		}
	}
	return true
}
