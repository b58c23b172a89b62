package kit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

var errInvalidRaw = errors.New("kit: event data is not valid JSON")

// eventExit is the event an agent reports a command's exit status with
// ({"code": N}); the prompt's log line carries the code.
const eventExit = "exit"

// noExit marks a prompt whose agent sent no exit event.
const noExit = -1 << 62

// turn is one prompt as its agent sees it.
type turn struct {
	ss     *session
	ctx    context.Context
	id     string
	text   string
	inputs []agent.Input
	skills []agent.SkillResult
	prefix []byte // {"type":"event","id":"<id>","event_type":

	mu   sync.RWMutex // held for reading by every send, for writing by finish
	done bool

	tagMu sync.Mutex
	tags  []string
}

var _ agent.Turn = (*turn)(nil)

func newTurn(ctx context.Context, ss *session, id string) *turn {
	t := &turn{ss: ss, ctx: ctx, id: id}
	t.prefix = append(t.prefix, `{"type":"event","id":`...)
	t.prefix = appendString(t.prefix, id)
	t.prefix = append(t.prefix, `,"event_type":`...)
	return t
}

func (t *turn) ID() string                  { return t.id }
func (t *turn) Text() string                { return t.text }
func (t *turn) Inputs() []agent.Input       { return t.inputs }
func (t *turn) Skills() []agent.SkillResult { return t.skills }
func (t *turn) Session() *agent.Session     { return t.ss.workspace.info }

// finish ends the turn: later calls fail with agent.ErrTurnDone, and every
// send already under way has completed when it returns.
func (t *turn) finish() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

// live reports whether the turn accepts calls; the caller holds t.mu for
// reading.
func (t *turn) live() error {
	if t.done {
		return agent.ErrTurnDone
	}
	if t.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", agent.ErrTurnDone, context.Cause(t.ctx))
	}
	return nil
}

// Emit implements agent.Turn.
func (t *turn) Emit(eventType string, data any) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.live(); err != nil {
		return err
	}
	return t.emitLocked(eventType, data)
}

func (t *turn) emitLocked(eventType string, data any) error {
	b := make([]byte, 0, len(t.prefix)+len(eventType)+rawLen(data)+48)
	b = append(b, t.prefix...)
	b = appendString(b, eventType)
	b = append(b, `,"data":`...)
	start := len(b)
	b, err := appendData(b, data)
	if err != nil {
		return fmt.Errorf("emit %s: %w", eventType, err)
	}
	// An exit event's code and limit are the run's record of how its
	// command ended: taken from an agent's own Go value (the exec agent's
	// exec.Exit), never from raw JSON an agent process sent (an ACP
	// agent's session update named "exit"), which it could forge.
	if _, raw := data.(json.RawMessage); eventType == eventExit && !raw {
		var x struct {
			Code  *int64 `json:"code"`
			Limit string `json:"limit"`
		}
		if json.Unmarshal(b[start:], &x) == nil && x.Code != nil {
			t.ss.exitCode.Store(*x.Code)
		}
		t.ss.srv.runs.noteLimit(t.ss, x.Limit) // runs.go
	}
	if err := t.ss.stream.sendSeq(t.ctx, b); err != nil {
		return fmt.Errorf("%w: %w", agent.ErrTurnDone, err)
	}
	t.ss.eventsSent.Add(1)
	if o := t.ss.srv.obs; o != nil {
		o.EventsSent.Add(1)
	}
	return nil
}

func rawLen(data any) int {
	if r, ok := data.(json.RawMessage); ok {
		return len(r)
	}
	return 64
}

// Ask implements agent.Turn.
func (t *turn) Ask(ctx context.Context, renderer string, input any) (json.RawMessage, error) {
	sl, err := t.push(renderer, input, true)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-sl.wait:
		if r.err != nil {
			return nil, r.err
		}
		if r.rejected {
			return nil, &agent.RejectedError{SlotID: sl.id, Reason: r.value}
		}
		return r.value, nil
	case <-ctx.Done():
	case <-t.ctx.Done():
	}
	t.mu.RLock()
	if !t.done && t.ss.slots.take(sl.id) != nil {
		t.ss.slots.sendClear(sl)
	}
	t.mu.RUnlock()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return nil, fmt.Errorf("%w: %w", agent.ErrTurnDone, context.Cause(t.ctx))
}

// Show implements agent.Turn.
func (t *turn) Show(renderer string, input any) (string, error) {
	sl, err := t.push(renderer, input, false)
	if err != nil {
		return "", err
	}
	return sl.id, nil
}

// Clear implements agent.Turn.
func (t *turn) Clear(slotID string) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.live(); err != nil {
		return err
	}
	sl := t.ss.slots.take(slotID)
	if sl == nil || sl.promptID != t.id {
		if sl != nil {
			t.ss.slots.put(sl) // not ours: leave it
		}
		return fmt.Errorf("clear display slot %s: no such slot on this prompt", slotID)
	}
	t.ss.slots.sendClear(sl)
	return nil
}

func (t *turn) push(renderer string, input any, wait bool) (*slot, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.live(); err != nil {
		return nil, err
	}
	raw, err := appendData(nil, input)
	if err != nil {
		return nil, fmt.Errorf("display slot input: %w", err)
	}
	sl := t.ss.slots.add(t.id, wait)
	b, err := protocol.Encode(&protocol.DisplayPush{
		Slot:     protocol.Slot{Renderer: renderer, Input: raw, ID: sl.id},
		PromptID: t.id,
	})
	if err == nil {
		err = t.ss.stream.sendSeq(t.ctx, b[:len(b)-1])
	}
	if err != nil {
		t.ss.slots.take(sl.id)
		return nil, fmt.Errorf("push display slot: %w", err)
	}
	return sl, nil
}

// TagOutput implements agent.Turn.
func (t *turn) TagOutput(path string) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if err := t.live(); err != nil {
		return err
	}
	abs, err := t.ss.workspace.resolveTag(path)
	if err != nil {
		return err
	}
	t.tagMu.Lock()
	t.tags = append(t.tags, abs)
	t.tagMu.Unlock()
	return nil
}
