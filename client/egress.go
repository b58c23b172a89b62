package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// WithEgress opens every session with its own egress rules: a box with
// an egress proxy (capability "egress_rules") lets the session's agents
// reach only what both its policy and these rules allow, or what these
// rules allow within the box's [network] session_may_allow. The rules
// travel in the session's hello, so they are in force before its first
// prompt runs, and again on every new session after a reconnect.
// Box.SetEgress changes them during the session.
func WithEgress(rules protocol.NetworkSpec) Option {
	return func(o *options) { r := rules; o.egress = &r }
}

// ErrNoEgressRules is returned by SetEgress when the box cannot take a
// session's own egress rules (it has no egress proxy, or predates them).
var ErrNoEgressRules = errors.New("the box takes no session egress rules")

// SetEgress replaces the session's own egress rules (opening the
// session if need be) and returns its effective policy. New connections
// of the session's agents follow them at once. Rules with no rules and no
// default clear them. The box refuses rules that do not check (the
// error says why) and the session keeps the rules it had.
func (b *Box) SetEgress(ctx context.Context, rules protocol.NetworkSpec) (*protocol.EgressEnvironment, error) {
	if err := rules.CheckSession(); err != nil {
		return nil, fmt.Errorf("box %q: session egress rules: %w", b.name, err)
	}
	b.egressMu.Lock()
	defer b.egressMu.Unlock()
	c, err := b.getConn(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan *protocol.EgressPolicy, 1)
	b.mu.Lock()
	// Before the box's hello the frame goes anyway: the box answers it
	// after the hello (and after the answer to the hello's own rules).
	if b.caps != nil && !b.caps[protocol.CapEgressRules] {
		b.mu.Unlock()
		return nil, fmt.Errorf("box %q: %w (it has no egress proxy, or is older than them)", b.name, ErrNoEgressRules)
	}
	b.egressWait = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if b.egressWait == ch {
			b.egressWait = nil
		}
		b.mu.Unlock()
	}()
	if !c.trySend(&protocol.EgressSet{Rules: rules}) {
		return nil, fmt.Errorf("box %q: the connection's send queue is full; retry", b.name)
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.requestTimeout)
	defer cancel()
	select {
	case ans := <-ch:
		if ans.Error != "" {
			return nil, fmt.Errorf("box %q refused the session egress rules: %s", b.name, ans.Error)
		}
		b.mu.Lock()
		r := rules
		b.egress = &r
		b.mu.Unlock()
		return ans.Policy, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("box %q: set the session egress rules: %w", b.name, ctx.Err())
	}
}

// Egress returns the session's effective egress policy as the box last
// reported it (its hello, or an answer to the session's rules); nil
// before the session opened or from a box without an egress proxy.
func (b *Box) Egress() *protocol.EgressEnvironment {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.egressView
}

// gotEgress handles an egress frame: the answer to the hello's rules,
// or to SetEgress. b.mu is held.
func (b *Box) gotEgress(m *protocol.EgressPolicy) {
	if m.Policy != nil {
		b.egressView = m.Policy
	}
	if b.egressHello {
		b.egressHello = false
		if m.Error != "" {
			b.log.Error("the box refused the session egress rules", "err", m.Error)
		}
		return
	}
	if b.egressWait == nil {
		if m.Error != "" {
			b.log.Error("the box refused the session egress rules", "err", m.Error)
		}
		return
	}
	select {
	case b.egressWait <- m:
	default:
	}
}

// SessionEgress shows (rules nil) or replaces another session's own
// egress rules through the admin route /sessions/{id}/egress (the key or
// an admin token), and returns that session's effective policy.
func (b *Box) SessionEgress(ctx context.Context, id string, rules *protocol.NetworkSpec) (*protocol.EgressEnvironment, error) {
	if id == "" || strings.ContainsAny(id, "/?#%") {
		return nil, fmt.Errorf("session id %q: want the id GET /sessions lists", id)
	}
	route := "sessions/" + id + "/egress"
	if rules == nil {
		var v protocol.EgressEnvironment
		if err := b.getJSON(ctx, route, true, &v); err != nil {
			return nil, err
		}
		return &v, nil
	}
	if err := rules.CheckSession(); err != nil {
		return nil, fmt.Errorf("session egress rules: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok && b.opts.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.requestTimeout)
		defer cancel()
	}
	body, _ := json.Marshal(rules)
	u := b.route(route)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", route, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("box %q: post %s: %w", b.name, route, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(fmt.Sprintf("box %q: post %s", b.name, u.Redacted()), resp)
	}
	var v protocol.EgressEnvironment
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&v); err != nil {
		return nil, fmt.Errorf("box %q: %s is not the JSON expected: %w", b.name, route, err)
	}
	return &v, nil
}
