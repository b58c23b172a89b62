package kit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Asking the session's client about a connection no rule covers
// ([network] ask). The proxy calls askEgress; the kit pushes an
// egress-ask display slot (protocol.RendererEgressAsk) on the running
// prompt and waits for the client's answer, or the ask timeout, which
// denies. Concurrent connections of a session to one host and port wait
// for the same ask. An approval for the session is kept until the
// session ends, and so is a denial (an agent that retries does not ask
// the human again); one for the box is applied to the live policy, as
// POST /egress would, before the connection goes ahead, and logged with
// the glovebox.toml line that keeps it. A session with no client
// attached, or no prompt running to show the slot, is not asked: the
// default decides, as without ask; so does a session with maxAsks asks
// under way already (an agent cannot flood its client with questions).

// sessionAsks are one session's approvals and asks under way.
type sessionAsks struct {
	mu      sync.Mutex
	allowed map[string]bool        // approval rules for the session
	denied  map[string]bool        // rules the client denied
	pending map[string]*pendingAsk // by approval rule
}

type pendingAsk struct {
	done chan struct{}
	ans  string
}

// asksOf returns the session's ask state, made on first use and dropped
// when the session ends.
func (e *kitEgress) asksOf(ss *session) *sessionAsks {
	if v, ok := e.asks.Load(ss.id); ok {
		return v.(*sessionAsks)
	}
	v, loaded := e.asks.LoadOrStore(ss.id, &sessionAsks{allowed: map[string]bool{}, denied: map[string]bool{}, pending: map[string]*pendingAsk{}})
	if !loaded {
		context.AfterFunc(ss.ctx, func() { e.asks.Delete(ss.id) })
	}
	return v.(*sessionAsks)
}

// askEgress is the session's egress.AskFunc.
func (ss *session) askEgress(ctx context.Context, host string, port int) string {
	e := ss.srv.egress
	rule := egress.ApprovalRule(host, port)
	sa := e.asksOf(ss)
	sa.mu.Lock()
	if sa.allowed[rule] {
		sa.mu.Unlock()
		return protocol.EgressAskSession
	}
	if sa.denied[rule] {
		sa.mu.Unlock()
		return protocol.EgressAskDeny
	}
	if p := sa.pending[rule]; p != nil {
		sa.mu.Unlock()
		select {
		case <-p.done:
			return p.ans
		case <-ctx.Done():
			return protocol.EgressAskDeny
		}
	}
	if len(sa.pending) >= maxAsks {
		sa.mu.Unlock()
		ss.logger().Warn("egress: too many asks under way; the default decides", "host", host, "port", port, "max", maxAsks)
		return ""
	}
	p := &pendingAsk{done: make(chan struct{})}
	sa.pending[rule] = p
	sa.mu.Unlock()

	ans := ss.askClient(ctx, host, port, rule)
	switch ans {
	case protocol.EgressAskBox:
		if err := ss.srv.egress.approveForBox(ss, rule); err != nil {
			ss.logger().Error("egress: an approval for the box could not be applied; allowing it once", "rule", rule, "err", err)
			ans = protocol.EgressAskOnce
		}
	}
	sa.mu.Lock()
	switch ans {
	case protocol.EgressAskSession:
		sa.allowed[rule] = true
	case protocol.EgressAskDeny:
		sa.denied[rule] = true
	}
	delete(sa.pending, rule)
	sa.mu.Unlock()
	p.ans = ans
	close(p.done)
	return ans
}

// maxAsks caps a session's asks under way, each for another host or
// port.
const maxAsks = 8

// askTimeout is the policy's ask_timeout, or the default.
func askTimeout(spec protocol.NetworkSpec) time.Duration {
	if d, err := protocol.ParseDuration(spec.AskTimeout); err == nil && spec.AskTimeout != "" {
		return d
	}
	return protocol.DefaultAskTimeout
}

// askClient shows the question on the running prompt and waits for the
// answer: "" when there is no one to ask.
func (ss *session) askClient(ctx context.Context, host string, port int, rule string) string {
	if ss.stream.conn.Load() == nil {
		return ""
	}
	t := ss.prompts.turnNow.Load()
	if t == nil {
		return ""
	}
	timeout := askTimeout(ss.srv.egress.proxy.Policy().Spec())
	target := rule
	in := protocol.EgressAsk{
		Message:   fmt.Sprintf("the agent wants %s", target),
		Host:      host,
		Port:      port,
		Choices:   protocol.EgressAskChoices,
		Line:      "allow = [" + strconv.Quote(rule) + "]",
		TimeoutMS: timeout.Milliseconds(),
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := t.Ask(actx, protocol.RendererEgressAsk, in)
	if err != nil {
		var rej *agent.RejectedError
		switch {
		case errors.As(err, &rej):
			return protocol.EgressAskDeny
		case ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded):
			ss.logger().Warn("egress: no answer to an ask in time; denied", "host", host, "port", port, "timeout", timeout)
			return protocol.EgressAskTimeout
		}
		// The prompt or the connection ended first: no one answered.
		return protocol.EgressAskTimeout
	}
	ans, err := protocol.ParseEgressAskAnswer(v)
	if err != nil {
		ss.logger().Warn("egress: an ask's answer is not one of the choices; denied", "host", host, "port", port, "err", err)
		return protocol.EgressAskDeny
	}
	return ans
}

// approveForBox adds rule to the box's live policy, as POST /egress
// would, and logs the glovebox.toml line that keeps it.
func (e *kitEgress) approveForBox(ss *session, rule string) error {
	e.polMu.Lock()
	defer e.polMu.Unlock()
	pol, err := e.proxy.Policy().WithAllow(rule)
	if err != nil {
		return err
	}
	e.proxy.SetPolicy(pol)
	e.refresh()
	e.log.Warn("egress: a session's client allowed a host for the box; the policy changed at runtime. Add this line's rule to glovebox.toml [network] to keep it",
		"line", "allow = ["+strconv.Quote(rule)+"]", "session", ss.id)
	return nil
}
