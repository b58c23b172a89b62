package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// protocolVersion is the ACP version this package speaks.
const protocolVersion = 1

var errClosed = errors.New("acp: session closed")

// conversation is one Glovebox session's ACP agent: its process (restarted
// when it dies), the ACP session inside it and the prompt in flight.
type conversation struct {
	a     *acpAgent
	s     *agent.Session
	log   *slog.Logger
	env   []string
	areas []area
	terms *terminals

	ctx  context.Context // ends on Close; bounds every handshake
	stop context.CancelFunc
	wg   sync.WaitGroup // launches

	mu     sync.Mutex
	launch *launch // the latest start of the agent
	proc   *proc   // the latest process, once started
	cur    *turnState
	early  []json.RawMessage // updates that arrived between prompts
	closed bool
	// last is the latest ACP session id, which a new process of the agent
	// loads (handshake.go); from agent.Session.Resume at first.
	last string
	// loading: a session/load is in flight; the history it replays is
	// dropped.
	loading bool
}

var _ agent.Resumable = (*conversation)(nil)

// AgentSession implements agent.Resumable: the ACP session id the kit
// keeps with a persistent session.
func (c *conversation) AgentSession() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

var (
	_ agent.Conversation = (*conversation)(nil)
	_ agent.Warmer       = (*conversation)(nil)
)

// Ready implements agent.Warmer: it waits until the agent's process has
// answered initialize and session/new, and returns a channel closed when
// that process ends.
func (c *conversation) Ready(ctx context.Context) (<-chan struct{}, error) {
	c.mu.Lock()
	l := c.launch
	c.mu.Unlock()
	if l == nil {
		return nil, errClosed
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if l.err != nil {
		return nil, l.err
	}
	return l.p.exited, nil
}

// launch is one start of the agent: its process and its handshake, run on
// their own goroutine so that a prompt can stop waiting for a slow start
// (abort, timeout) without breaking it.
type launch struct {
	done chan struct{} // closed when the handshake is over
	p    *proc         // set before done closes, nil if the process did not start
	err  error         // the start's failure, valid after done
}

// usable reports whether a prompt may use this launch's process, or wait
// for it.
func (l *launch) usable() bool {
	select {
	case <-l.done:
		return l.err == nil && l.p.alive()
	default:
		return true
	}
}

// relaunchLocked starts the agent anew. c.mu is held.
func (c *conversation) relaunchLocked() *launch {
	old := c.launch
	l := &launch{done: make(chan struct{})}
	c.launch = l
	c.wg.Add(1)
	go c.run(l, old)
	return l
}

// run starts the process and opens its ACP session (initialize,
// session/new), after stopping what old left.
func (c *conversation) run(l, old *launch) {
	defer c.wg.Done()
	defer close(l.done)
	if old != nil {
		<-old.done
		if old.p != nil {
			old.p.stop(c.a.stopGrace)
			c.terms.killAll()
			c.log.Warn("acp: restarting the agent process", "last", old.p.exitStatus())
		}
	}
	p, err := startProc(c.s.Sandbox, c.a.command, workDir(c.s), c.env, c, c.log, c.a.maxLine, c.a.maxInbound)
	if err != nil {
		l.err = err
		return
	}
	l.p = p
	c.mu.Lock()
	c.proc = p
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, handshakeTimeout)
	defer cancel()
	if err := c.handshake(ctx, p); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && c.ctx.Err() == nil {
			err = fmt.Errorf("acp: the agent did not finish initialize and session/new within %v: %w", handshakeTimeout, err)
		}
		p.stop(c.a.stopGrace)
		l.err = err
	}
}

// ensure returns the running agent process, starting one (initialize,
// session/new) when there is none or the last one died, and waiting at
// most until ctx ends for a start in progress.
func (c *conversation) ensure(ctx context.Context) (*proc, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClosed
	}
	l := c.launch
	if l == nil || !l.usable() {
		l = c.relaunchLocked()
	}
	c.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if l.err != nil {
		return nil, l.err
	}
	return l.p, nil
}

// Prompt implements agent.Conversation: one session/prompt.
func (c *conversation) Prompt(ctx context.Context, t agent.Turn) (string, error) {
	p, err := c.ensure(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", &agent.Error{Code: protocol.CodeAgent, Err: err}
	}
	if ctx.Err() != nil {
		return "", context.Cause(ctx)
	}
	ts := newTurnState(ctx, t, c.log)
	c.begin(ts)
	defer c.end(ts)

	c.mu.Lock()
	first := !p.prompted
	p.prompted = true
	sessionID := p.sessionID
	c.mu.Unlock()
	params := map[string]any{"sessionId": sessionID, "prompt": c.promptBlocks(t, first)}
	id, ch := p.conn.call(ctx, "session/prompt", params)

	var r response
	select {
	case r = <-ch:
	case <-ctx.Done():
		c.cancel(p, id, ch, sessionID)
		return "", context.Cause(ctx)
	}
	if r.err != nil {
		if p.conn.err() != nil {
			if !p.hasExited() { // it broke the protocol, or stopped reading, but still runs
				p.stop(c.a.stopGrace)
			}
			if ctx.Err() != nil {
				return "", context.Cause(ctx)
			}
			return "", &agent.Error{Code: protocol.CodeAgent, Err: p.exitError(ctx, c.a.stopGrace, "the prompt")}
		}
		if ctx.Err() != nil { // the agent answered with an error as the prompt ended
			return "", context.Cause(ctx)
		}
		var re *rpcError
		if errors.As(r.err, &re) && re.Code == codeAuthRequired {
			return "", &agent.Error{Code: protocol.CodeAgent, Err: fmt.Errorf("acp: the agent requires authentication (auth methods %s); give it its credentials through the box's env: %w", p.authMethods, r.err)}
		}
		return "", &agent.Error{Code: protocol.CodeAgent, Err: fmt.Errorf("acp: session/prompt: %w", r.err)}
	}

	var res struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(r.result, &res); err != nil || res.StopReason == "" {
		return "", &agent.Error{Code: protocol.CodeAgent, Err: fmt.Errorf("acp: protocol violation: session/prompt result has no stopReason: %s", clip(r.result))}
	}
	ts.mu.Lock()
	_ = ts.emit("stop", stopData(r.result, res.StopReason))
	msg := ts.text.String()
	ts.mu.Unlock()
	if res.StopReason == "cancelled" {
		return "", &agent.Error{Code: protocol.CodeAborted, Err: errors.New("acp: the agent cancelled the turn")}
	}
	return msg, nil
}

// cancel sends session/cancel and waits, at most the cancel grace, for
// the prompt's response. An agent that does not answer in time is
// stopped; the next prompt starts a new one.
func (c *conversation) cancel(p *proc, id int64, ch <-chan response, sessionID string) {
	wctx, done := context.WithTimeout(context.Background(), c.a.cancelGrace)
	defer done()
	if err := p.conn.notifyAgent(wctx, "session/cancel", map[string]string{"sessionId": sessionID}); err != nil {
		c.log.Warn("acp: session/cancel not sent", "err", err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			c.log.Info("acp: cancelled prompt ended with an error", "err", r.err)
		} else {
			c.log.Debug("acp: cancelled prompt answered", "result", clip(r.result))
		}
		if p.conn.err() != nil && !p.hasExited() { // its connection broke, but it runs
			p.stop(c.a.stopGrace)
			c.terms.killAll()
		}
	case <-wctx.Done():
		p.conn.forget(id)
		c.log.Warn("acp: the agent did not answer session/cancel in time; stopping it", "grace", c.a.cancelGrace)
		p.stop(c.a.stopGrace)
		c.terms.killAll()
	}
}

// promptBlocks builds session/prompt's content.
func (c *conversation) promptBlocks(t agent.Turn, first bool) []any {
	var blocks []any
	text := func(s string) { blocks = append(blocks, map[string]string{"type": "text", "text": s}) }
	if first && c.s.Preamble != "" {
		text(c.s.Preamble)
	}
	for _, sk := range t.Skills() {
		text("[Skill: " + sk.Name + "]\n" + sk.Content)
	}
	if t.Text() != "" || len(blocks) == 0 {
		text(t.Text())
	}
	for _, in := range t.Inputs() {
		link := map[string]any{
			"type": "resource_link",
			"uri":  (&url.URL{Scheme: "file", Path: in.Path}).String(),
			"name": in.Name,
			"size": in.Size,
		}
		if in.Mime != "" {
			link["mimeType"] = in.Mime
		}
		blocks = append(blocks, link)
	}
	return blocks
}

// begin makes ts the turn that receives updates, after emitting the
// updates held since the last prompt. ts.mu is held until they are out,
// so the reader cannot overtake them.
func (c *conversation) begin(ts *turnState) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	c.mu.Lock()
	early := c.early
	c.early = nil
	c.cur = ts
	c.mu.Unlock()
	for _, u := range early {
		ts.handleLocked(u)
	}
}

func (c *conversation) end(ts *turnState) {
	c.mu.Lock()
	if c.cur == ts {
		c.cur = nil
	}
	c.mu.Unlock()
}

// holdLocked keeps an update for the next prompt. c.mu is held.
func (c *conversation) holdLocked(u json.RawMessage) {
	if len(c.early) >= maxEarlyUpdates {
		c.log.Warn("acp: too many updates between prompts; dropping the oldest", "limit", maxEarlyUpdates)
		c.early = c.early[1:]
	}
	c.early = append(c.early, u)
}

// notify implements handler: the agent's notifications.
func (c *conversation) notify(method string, params json.RawMessage) {
	if method != "session/update" {
		c.log.Warn("acp: ignoring an unknown notification from the agent", "method", method, "params", clip(params))
		return
	}
	var n struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if err := json.Unmarshal(params, &n); err != nil || len(n.Update) == 0 {
		c.log.Error("acp: protocol violation: session/update without an update", "params", clip(params))
		n.Update = params
	}
	c.deliver(n.SessionID, func() json.RawMessage { return n.Update }, func(ts *turnState) error {
		return ts.handleLocked(n.Update)
	})
}

// quick implements handler: it serves the commonest line, a text chunk
// of a session/update, in one decoding pass. Any other line is left to
// dispatch.
func (c *conversation) quick(line []byte) bool {
	if !bytes.Contains(line, []byte(`"session/update"`)) {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Kind    string `json:"sessionUpdate"`
				Content struct {
					Type string  `json:"type"`
					Text *string `json:"text"`
				} `json:"content"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "session/update" || m.ID != nil ||
		m.Params.Update.Content.Type != "text" || m.Params.Update.Content.Text == nil {
		return false
	}
	kind, text := m.Params.Update.Kind, *m.Params.Update.Content.Text
	if kind != "agent_message_chunk" && kind != "agent_thought_chunk" {
		return false
	}
	raw := func() json.RawMessage {
		b, _ := json.Marshal(map[string]any{"sessionUpdate": kind, "content": map[string]string{"type": "text", "text": text}})
		return b
	}
	c.deliver(m.Params.SessionID, raw, func(ts *turnState) error {
		for _, ev := range ts.textChunk(kind, text) {
			if err := ts.emit(ev.typ, ev.data); err != nil {
				return err
			}
		}
		return nil
	})
	return true
}

// deliver gives one update to the prompt in flight, or holds it for the
// next one. raw is the update as sent, for holding.
func (c *conversation) deliver(sessionID string, raw func() json.RawMessage, handle func(*turnState) error) {
	c.mu.Lock()
	if c.loading {
		c.mu.Unlock()
		return // a loaded session's history, replayed
	}
	if c.proc != nil && c.proc.sessionID != "" && sessionID != c.proc.sessionID {
		c.log.Warn("acp: session/update for another ACP session", "acp_session", sessionID)
	}
	var over *turnState // a turn that refused the update as over
	for {
		// Checking for a turn and holding the update happen under one lock,
		// so begin cannot take the held updates in between. An update that
		// came after the prompt's response belongs to the next turn.
		ts := c.cur
		if ts == nil || ts == over {
			c.holdLocked(raw())
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ts.mu.Lock()
		err := handle(ts)
		ts.mu.Unlock()
		if !errors.Is(err, agent.ErrTurnDone) || ts.ctx.Err() != nil {
			return
		}
		over = ts
		c.mu.Lock()
	}
}

// request implements handler: the agent's requests.
func (c *conversation) request(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case "session/request_permission":
		return c.requestPermission(ctx, params)
	case "fs/read_text_file":
		return c.readTextFile(params)
	case "fs/write_text_file":
		return c.writeTextFile(params)
	case "terminal/create":
		return c.terms.create(params)
	case "terminal/output":
		return c.terms.output(params)
	case "terminal/wait_for_exit":
		return c.terms.waitForExit(ctx, params)
	case "terminal/kill":
		return c.terms.kill(params)
	case "terminal/release":
		return c.terms.release(params)
	}
	c.log.Warn("acp: the agent called a method the kit does not serve", "method", method)
	return nil, rpcErrorf(codeMethodNotFound, "method not found: %s", method)
}

// Close implements agent.Conversation: it stops the agent's process group
// and every terminal, and waits for them.
func (c *conversation) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	l := c.launch
	c.mu.Unlock()
	c.stop() // ends a handshake in progress
	if l != nil {
		<-l.done
		if l.p != nil {
			l.p.stop(c.a.stopGrace)
		}
	}
	c.wg.Wait()
	c.terms.killAll()
	return nil
}
