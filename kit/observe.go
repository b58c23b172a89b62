package kit

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Bounds of what a session keeps for the inspector. Nothing is kept when
// the inspector is off.
const (
	observeHistoryFrames = 512      // recent frames replayed to a new observer
	observeHistoryBytes  = 1 << 20  // and at most this many bytes of them
	observeTotalBytes    = 64 << 20 // all sessions' histories together
	observeQueue         = 256      // frames an observer may lag behind before it is dropped
	observeMaxPerSession = 8        // observers of one session
	observeMaxPrompts    = 64       // prompts a session remembers
	observePromptText    = 4096     // bytes of a prompt's text remembered
)

// observers fans a session's numbered frames out to read-only observers
// (the inspector's event streams). Publishing never blocks: an observer
// whose queue is full is dropped (its channel closed) and may subscribe
// again; the session is never slowed by one.
type observers struct {
	mu        sync.Mutex
	history   [][]byte
	histBytes int
	subs      map[chan []byte]struct{}
	prompts   []*inspect.PromptInfo
	started   time.Time
	closed    bool
	// total counts every session's history bytes (the inspector's);
	// nil keeps no count (tests).
	total *atomic.Int64

	// The session's sandbox, sampled for the inspector (resources.go),
	// and what was sampled.
	box        atomic.Pointer[sandbox.Session]
	samples    []inspect.ResourceSample
	peaks      inspect.ResourcePeaks
	lastCPU    time.Duration
	lastSample time.Time
}

// observed reports whether the session keeps anything for observers.
func (ss *session) observed() bool { return ss.srv.inspect != nil }

// publish hands a numbered frame to the history and every observer. The
// caller holds the stream's mu, so frames arrive in seq order; frame is
// never modified afterwards.
func (o *observers) publish(frame []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.noteOutcome(frame)
	o.history = append(o.history, frame)
	o.histBytes += len(frame)
	o.add(len(frame))
	// Over the box's budget, a session keeps only its latest frame.
	overBox := o.total != nil && o.total.Load() > observeTotalBytes
	drop := 0
	for drop < len(o.history)-1 && (overBox || len(o.history)-drop > observeHistoryFrames || o.histBytes > observeHistoryBytes) {
		o.histBytes -= len(o.history[drop])
		o.add(-len(o.history[drop]))
		drop++
	}
	if drop > 0 {
		n := len(o.history)
		o.history = append(o.history[:0], o.history[drop:]...)
		clear(o.history[len(o.history):n]) // no reference to dropped frames
	}
	for ch := range o.subs {
		select {
		case ch <- frame:
		default: // too slow: dropped, never waited for
			delete(o.subs, ch)
			close(ch)
		}
	}
}

func (o *observers) add(n int) {
	if o.total != nil {
		o.total.Add(int64(n))
	}
}

// noteOutcome marks a prompt complete or failed from its final frame,
// and notes its exit status from its exit event.
func (o *observers) noteOutcome(frame []byte) {
	isComplete := bytes.HasPrefix(frame, []byte(`{"type":"complete"`))
	isExit := bytes.HasPrefix(frame, []byte(`{"type":"event"`)) && bytes.Contains(frame, []byte(`"event_type":"exit"`))
	if !isComplete && !isExit && !bytes.HasPrefix(frame, []byte(`{"type":"error"`)) {
		return
	}
	var f struct {
		ID        string `json:"id"`
		EventType string `json:"event_type"`
		Data      struct {
			Code   *int   `json:"code"`
			Signal string `json:"signal"`
			Limit  string `json:"limit"`
		} `json:"data"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Outputs map[string]inspect.OutputSummary `json:"outputs"`
	}
	if json.Unmarshal(frame, &f) != nil || f.ID == "" {
		return
	}
	for _, p := range o.prompts {
		if p.ID != f.ID || !p.Ended.IsZero() {
			continue
		}
		switch {
		case isExit:
			if f.EventType == "exit" && f.Data.Code != nil {
				p.Exit, p.Signal, p.Limit = f.Data.Code, f.Data.Signal, f.Data.Limit
			}
		case isComplete:
			p.Ended, p.State = time.Now(), "complete"
			if len(f.Outputs) > 0 && len(f.Outputs) <= 256 {
				p.Outputs = f.Outputs
			}
		default:
			p.Ended, p.State, p.Code = time.Now(), "error", f.Error.Code
			if p.Code == protocol.CodeTimeout && p.Limit == "" {
				p.Limit = "timeout"
			}
		}
	}
}

// queued records a prompt as it enters the queue.
func (o *observers) queued(id, text string, inputs []string) {
	if len(text) > observePromptText {
		text = text[:observePromptText]
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.prompts) == observeMaxPrompts {
		o.prompts = append(o.prompts[:0], o.prompts[1:]...)
	}
	o.prompts = append(o.prompts, &inspect.PromptInfo{ID: id, Text: text, Inputs: inputs, State: "queued", Queued: time.Now()})
}

// running records that a queued prompt started.
func (o *observers) running(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.prompts {
		if p.ID == id && p.State == "queued" {
			p.State, p.Started = "running", time.Now()
		}
	}
}

// subscribe returns the frames kept so far and a channel of the next
// ones, or ok false when the session has ended or has too many observers.
func (o *observers) subscribe() (past [][]byte, ch chan []byte, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || len(o.subs) >= observeMaxPerSession {
		return nil, nil, false
	}
	if o.subs == nil {
		o.subs = map[chan []byte]struct{}{}
	}
	ch = make(chan []byte, observeQueue)
	o.subs[ch] = struct{}{}
	return append([][]byte(nil), o.history...), ch, true
}

// unsubscribe removes an observer that stops reading.
func (o *observers) unsubscribe(ch chan []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.subs[ch]; ok {
		delete(o.subs, ch)
		close(ch)
	}
}

// close ends every observer's stream: the session is over.
func (o *observers) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	// A prompt with no outcome yet never gets one: it stays as the
	// session left it, not "running".
	now := time.Now()
	for _, p := range o.prompts {
		if p.Ended.IsZero() {
			p.State, p.Ended = "ended", now
		}
	}
	for ch := range o.subs {
		close(ch)
	}
	o.subs = nil
	o.add(-o.histBytes)
	o.histBytes = 0
	o.history = nil
}

// promptList returns copies of the prompts remembered.
func (o *observers) promptList() []inspect.PromptInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]inspect.PromptInfo, len(o.prompts))
	for i, p := range o.prompts {
		out[i] = *p
	}
	return out
}
