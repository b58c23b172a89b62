package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Event is one agent event of a prompt (the wire "event" frame).
type Event struct {
	// Type is the event_type: text_delta, tool_use, stdout, exit, ...
	Type string
	// Data is the event's JSON payload.
	Data json.RawMessage
	// Seq is the box's sequence number, 0 from a v1 box.
	Seq uint64
}

// Display update kinds.
const (
	DisplayPush  = "push"
	DisplayClear = "clear"
)

// DisplayEvent is a display slot pushed or cleared while a prompt runs.
type DisplayEvent struct {
	Kind   string        // DisplayPush or DisplayClear
	Slot   protocol.Slot // the slot, for a push
	SlotID string        // the slot's id, for both kinds
}

// Completion is a prompt's successful end.
type Completion struct {
	// Message is the final assistant message.
	Message string
	// Outputs are the files the prompt returned, by name. Result.Read
	// fetches their bytes whatever their kind.
	Outputs map[string]protocol.FileRef
}

// Result is a prompt in flight and, once it ended, its outcome. Its methods
// are safe for concurrent use.
type Result struct {
	box     *Box
	id      string
	discard bool
	limit   int

	mu       sync.Mutex
	events   []Event
	display  []DisplayEvent
	buffered int           // bytes of unread events and display updates
	notify   chan struct{} // closed and replaced whenever something changes
	done     chan struct{} // closed when the prompt ended
	final    *Completion
	err      error
	stop     func() bool // stops the prompt context's AfterFunc

	// Guarded by the box's mu.
	frame  []byte // the prompt frame, until the box acknowledges it
	seen   bool   // the box sent a frame for this prompt
	resent bool   // the frame was sent again after a resume
}

// ack records that the box has the prompt. The box's mu is held.
func (r *Result) ack() {
	r.seen = true
	r.frame = nil
}

func newResult(b *Box, id string, discard bool) *Result {
	return &Result{box: b, id: id, discard: discard, limit: b.opts.eventBuffer,
		notify: make(chan struct{}), done: make(chan struct{})}
}

// ID is the prompt's id, unique within its box.
func (r *Result) ID() string { return r.id }

// Done is closed when the prompt has ended, successfully or not.
func (r *Result) Done() <-chan struct{} { return r.done }

// Events yields the prompt's events in the order the box sent them. It
// ends when the prompt ended and every event was yielded, or when ctx is
// done. Events are handed out once: concurrent loops share one stream, and
// a loop started after another stopped continues where it left off.
// Breaking out of the loop early is fine.
func (r *Result) Events(ctx context.Context) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for {
			e, ok := takeNext(r, ctx, func() (Event, bool) {
				if len(r.events) == 0 {
					return Event{}, false
				}
				e := r.events[0]
				r.events[0] = Event{}
				r.events = r.events[1:]
				r.buffered -= len(e.Data)
				return e, true
			})
			if !ok || !yield(e) {
				return
			}
		}
	}
}

// Display yields the display slots pushed and cleared while the prompt
// runs, with the same rules as Events. A box that tags display frames with
// their prompt (ours does) sends a prompt only its own slots; a v1 box's
// slots go to every prompt in flight on the box.
func (r *Result) Display(ctx context.Context) iter.Seq[DisplayEvent] {
	return func(yield func(DisplayEvent) bool) {
		for {
			d, ok := takeNext(r, ctx, func() (DisplayEvent, bool) {
				if len(r.display) == 0 {
					return DisplayEvent{}, false
				}
				d := r.display[0]
				r.display[0] = DisplayEvent{}
				r.display = r.display[1:]
				r.buffered -= len(d.Slot.Input)
				return d, true
			})
			if !ok || !yield(d) {
				return
			}
		}
	}
}

// takeNext waits for pop to find an item, the prompt to end with nothing
// left, or ctx.
func takeNext[T any](r *Result, ctx context.Context, pop func() (T, bool)) (T, bool) {
	for {
		r.mu.Lock()
		v, ok := pop()
		if ok {
			r.mu.Unlock()
			return v, true
		}
		ended := r.isDone()
		wait := r.notify
		r.mu.Unlock()
		if ended {
			return v, false
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return v, false
		}
	}
}

// Wait waits for the prompt to end and returns its message and outputs.
// A failure reported by the box is an *Error carrying its code; a dropped
// connection wraps ErrConnectionLost. If ctx ends first, Wait returns its
// error and the prompt goes on (cancel the context given to Prompt, or
// call Abort, to stop it).
func (r *Result) Wait(ctx context.Context) (*Completion, error) {
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final, r.err
}

// Resolve answers a display slot with value (marshalled to JSON).
func (r *Result) Resolve(ctx context.Context, slotID string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("resolve slot %s: encode value: %w", slotID, err)
	}
	return r.box.send(ctx, &protocol.DisplayResolve{SlotID: slotID, Value: raw})
}

// Reject rejects a display slot; reason (marshalled to JSON) tells the
// agent why, typically a string.
func (r *Result) Reject(ctx context.Context, slotID string, reason any) error {
	raw, err := json.Marshal(reason)
	if err != nil {
		return fmt.Errorf("reject slot %s: encode reason: %w", slotID, err)
	}
	return r.box.send(ctx, &protocol.DisplayReject{SlotID: slotID, Error: raw})
}

// Abort asks the box to stop the prompt, running or queued. The prompt
// then ends with an *Error whose Code is protocol.CodeAborted. Aborting a
// prompt that already ended does nothing.
func (r *Result) Abort(ctx context.Context) error {
	if r.isDone() {
		return nil
	}
	return r.box.send(ctx, &protocol.Abort{ID: r.id})
}

func (r *Result) isDone() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// wake tells waiting iterators something changed. r.mu is held.
func (r *Result) wake() {
	close(r.notify)
	r.notify = make(chan struct{})
}

// addEvent buffers an event. It reports false when the buffer is full; the
// caller then fails the prompt.
func (r *Result) addEvent(e Event) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isDone() || r.discard {
		return true
	}
	if r.buffered+len(e.Data) > r.limit {
		return false
	}
	r.buffered += len(e.Data)
	r.events = append(r.events, e)
	r.wake()
	return true
}

func (r *Result) addDisplay(d DisplayEvent) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isDone() {
		return true
	}
	if r.buffered+len(d.Slot.Input) > r.limit {
		return false
	}
	r.buffered += len(d.Slot.Input)
	r.display = append(r.display, d)
	r.wake()
	return true
}

// finish ends the prompt once; later calls do nothing.
func (r *Result) finish(c *Completion, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isDone() {
		return
	}
	r.final, r.err = c, err
	close(r.done)
	r.wake()
	if r.stop != nil {
		r.stop()
	}
}
