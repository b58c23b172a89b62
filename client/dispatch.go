package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// handle routes one frame from the box, read from c.
func (b *Box) handle(c *conn, data []byte) {
	m, err := protocol.DecodeServer(data)
	if err != nil {
		if !errors.Is(err, protocol.ErrUnknownType) {
			b.failMalformed(data, err)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c != nil {
		defer b.resend(c)
	}
	if seq := seqOf(m); seq > 0 {
		if seq <= b.lastSeq {
			return // already seen: a replay after resume
		}
		b.lastSeq = seq
	}
	switch m := m.(type) {
	case *protocol.ServerHello:
		b.applyHello(m)
		// A box that takes session rules answers the hello's with an
		// egress frame, after this hello.
		b.egressHello = b.egress != nil && b.caps[protocol.CapEgressRules]
	case *protocol.EgressPolicy:
		b.gotEgress(m)
	case *protocol.Draining:
		b.drainUntil = time.UnixMilli(m.Deadline)
		b.log.Info("box is shutting down", "deadline", b.drainUntil, "message", m.Message)
		if f := b.opts.onDraining; f != nil {
			deadline := b.drainUntil
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				f(b.name, deadline)
			}()
		}
	case *protocol.Event:
		if r := b.inflight[m.ID]; r != nil {
			r.ack()
			if !r.addEvent(Event{Type: m.EventType, Data: m.Data, Seq: m.Seq}) {
				b.overflow(r)
			}
		}
	case *protocol.DisplayPush:
		b.fanOut(m.PromptID, DisplayEvent{Kind: DisplayPush, Slot: m.Slot, SlotID: m.Slot.ID})
	case *protocol.DisplayClear:
		b.fanOut(m.PromptID, DisplayEvent{Kind: DisplayClear, SlotID: m.SlotID})
	case *protocol.Complete:
		if r := b.inflight[m.ID]; r != nil {
			r.ack()
			delete(b.inflight, m.ID)
			r.finish(&Completion{Message: m.Message, Outputs: m.Outputs}, nil)
		}
	case *protocol.Error:
		if m.ID == "" {
			b.log.Info("box reported an error", "code", m.Error.Code, "message", m.Error.Message)
			return
		}
		if r := b.inflight[m.ID]; r != nil {
			if r.resent && m.Error.Code == protocol.CodeDuplicateID {
				return // the box had the prompt after all
			}
			r.ack()
			delete(b.inflight, m.ID)
			r.finish(nil, &Error{Code: m.Error.Code, Message: m.Error.Message})
		}
	}
}

// failMalformed handles a frame that cannot be decoded. A frame naming a
// prompt in flight fails that prompt, which would otherwise never end;
// any other is logged and dropped.
func (b *Box) failMalformed(data []byte, err error) {
	id := protocol.PeekID(data)
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.inflight[id]
	if id == "" || r == nil {
		b.log.Info("ignoring a malformed frame", "err", err)
		return
	}
	delete(b.inflight, id)
	r.finish(nil, fmt.Errorf("prompt %s: %w: %v", id, ErrMalformedFrame, err))
	if b.conn != nil {
		b.conn.trySend(&protocol.Abort{ID: id})
	}
}

// fanOut delivers a display update to its prompt, or to every prompt in
// flight when the box did not say which (v1). b.mu is held.
func (b *Box) fanOut(promptID string, d DisplayEvent) {
	if promptID != "" {
		if r := b.inflight[promptID]; r != nil {
			r.ack()
			if !r.addDisplay(d) {
				b.overflow(r)
			}
		}
		return
	}
	for _, r := range b.inflight {
		if !r.addDisplay(d) {
			b.overflow(r)
		}
	}
}

// overflow fails a prompt whose reader fell too far behind and aborts it
// on the box. b.mu is held.
func (b *Box) overflow(r *Result) {
	delete(b.inflight, r.id)
	r.finish(nil, fmt.Errorf("prompt %s: %w (over %d bytes unread): read Result.Events and Result.Display while the prompt runs, or set PromptOptions.DiscardEvents", r.id, ErrBufferFull, b.opts.eventBuffer))
	if b.conn != nil {
		b.conn.trySend(&protocol.Abort{ID: r.id})
	}
}

func seqOf(m protocol.ServerMessage) uint64 {
	switch m := m.(type) {
	case *protocol.Event:
		return m.Seq
	case *protocol.DisplayPush:
		return m.Seq
	case *protocol.DisplayClear:
		return m.Seq
	case *protocol.Complete:
		return m.Seq
	case *protocol.Error:
		return m.Seq
	}
	return 0
}
