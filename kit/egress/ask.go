package egress

import (
	"context"
	"fmt"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// A human in the loop. With [network] ask on, a connection no rule
// covers (the policy's default would decide it) is held while the
// session's Ask asks its client; the answer decides:
//
//   - once: the connection goes ahead, and so do the requests it carries
//     (a kept-alive connection, a brokered tunnel's requests);
//   - session, box: the same, and the session's Ask remembers it (the kit
//     keeps a session's approvals and applies a box's to the live policy
//     before it answers);
//   - deny, or no answer in time: the connection is denied, its block
//     saying who decided;
//   - "" (no client to ask): the default decides, as without ask.
//
// An approved connection is decided again with the approval as an allow
// rule, so the addresses its name resolves to are still checked: an
// approval never opens an address the kit's table closes.

// AskFunc asks a session's client about a connection to host:port and
// returns its answer: one of the protocol.EgressAsk* answers, or "" when
// there was no one to ask. It returns when ctx ends.
type AskFunc func(ctx context.Context, host string, port int) string

// byDefault reports whether the policy's default decided d.
func byDefault(d Decision) bool {
	return d.Verdict != Fail && strings.HasPrefix(d.Rule, "default = ")
}

// ApprovalRule is the allow rule an approval of host:port stands for.
func ApprovalRule(host string, port int) string { return hostPort(normHost(host), port) }

// ask turns a decision the default made into the client's, when the
// box's policy asks and the session has someone to ask.
func (h *handler) ask(host string, port int, d Decision) Decision {
	pol := h.p.policy.Load()
	if !pol.spec.Ask || !byDefault(d) {
		return d
	}
	host = normHost(host)
	rule := ApprovalRule(host, port)
	ans := h.approved[rule]
	if ans == "" {
		if h.s.Ask == nil {
			return d
		}
		ans = h.s.Ask(h.ctx, host, port)
	}
	switch ans {
	case "":
		return d
	case protocol.EgressAskOnce, protocol.EgressAskSession, protocol.EgressAskBox:
		if h.approved == nil {
			h.approved = map[string]string{}
		}
		h.approved[rule] = ans
		np := pol
		if live := h.p.policy.Load(); ans == protocol.EgressAskBox && live.allows(rule) {
			np = live // the kit applied it to the box's policy
		} else if np = pol.with(rule); np == nil {
			return Decision{Verdict: Deny, Rule: "ask: " + ans, Asked: ans, Addrs: d.Addrs,
				Reason: fmt.Sprintf("%s was approved but cannot be written as an allow rule", hostPort(host, port))}
		}
		dd := np.Decide(h.ctx, h.p.guard, h.resolve, host, port)
		dd.Asked = ans
		if dd.Allowed() {
			dd.Rule = rule
			dd.Reason = fmt.Sprintf("%s was allowed by the session's client (%s)", hostPort(host, port), askWords[ans])
		}
		return dd
	}
	reason := fmt.Sprintf("the session's client denied %s", hostPort(host, port))
	if ans == protocol.EgressAskTimeout {
		reason = fmt.Sprintf("no rule covers %s and the session's client did not answer in time", hostPort(host, port))
	}
	return Decision{Verdict: Deny, Rule: "ask: " + ans, Asked: ans, Addrs: d.Addrs, Reason: reason}
}

var askWords = map[string]string{
	protocol.EgressAskOnce:    "once",
	protocol.EgressAskSession: "for this session",
	protocol.EgressAskBox:     "for the box",
}

// allows reports whether the policy's allow list holds rule as written.
func (p *Policy) allows(rule string) bool {
	for _, r := range p.spec.Allow {
		if r == rule {
			return true
		}
	}
	return false
}

// with returns the policy with one more allow rule, nil when rule is
// not one.
func (p *Policy) with(rule string) *Policy {
	spec := p.Spec()
	spec.Allow = append(spec.Allow, rule)
	np, err := NewPolicy(spec)
	if err != nil {
		return nil
	}
	return np
}

// WithAllow returns the policy with rule added to its allow list (the
// same policy when it is there already): an approval for the box.
func (p *Policy) WithAllow(rule string) (*Policy, error) {
	if p.allows(rule) {
		return p, nil
	}
	spec := p.Spec()
	spec.Allow = append(spec.Allow, rule)
	return NewPolicy(spec)
}
