package kit

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// slots are the display slots a session's prompts pushed and the client
// still shows: numbered in the order they were pushed, answered by the
// client (or the inspector), cleared when their prompt ends.
type slots struct {
	ss *session

	mu sync.Mutex
	m  map[string]*slot
	n  int // the last slot's number
}

// slot is a display slot pushed by a prompt.
type slot struct {
	id       string
	n        int // the number in id: slots are cleared in the order they were pushed
	promptID string
	wait     chan slotResult // nil for slots that need no answer
}

type slotResult struct {
	value    json.RawMessage
	rejected bool
	err      error
}

// add registers a new slot of the prompt; wait makes one that needs an
// answer.
func (s *slots) add(promptID string, wait bool) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	sl := &slot{id: "slot_" + strconv.Itoa(s.n), n: s.n, promptID: promptID}
	if wait {
		sl.wait = make(chan slotResult, 1)
	}
	if s.m == nil {
		s.m = map[string]*slot{}
	}
	s.m[sl.id] = sl
	return sl
}

// get returns the slot with that id, or nil.
func (s *slots) get(id string) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

// take removes the slot with that id and returns it, or nil.
func (s *slots) take(id string) *slot {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.m[id]
	if sl != nil {
		delete(s.m, id)
	}
	return sl
}

// put gives back a slot take removed.
func (s *slots) put(sl *slot) {
	s.mu.Lock()
	s.m[sl.id] = sl
	s.mu.Unlock()
}

// sendClear tells the client a slot left the display.
func (s *slots) sendClear(sl *slot) {
	if err := s.ss.stream.sendMessage(context.Background(), &protocol.DisplayClear{SlotID: sl.id, PromptID: sl.promptID}); err != nil {
		s.ss.logger().Debug("display_clear not sent", "slot", sl.id, "err", err)
	}
}

// settle answers a slot from the client: it leaves the display (the
// client is told so) and its waiter gets the answer. Slots of other
// sessions, unknown slots and slots that need no answer are ignored.
func (s *slots) settle(id string, r slotResult) {
	s.mu.Lock()
	sl := s.m[id]
	if sl == nil || sl.wait == nil {
		s.mu.Unlock()
		s.ss.logger().Debug("display answer for an unknown slot ignored", "slot", id)
		return
	}
	delete(s.m, id)
	s.mu.Unlock()
	s.sendClear(sl)
	sl.wait <- r
}

// clear removes the slots a finished prompt left on the display.
func (s *slots) clear(promptID string) {
	s.mu.Lock()
	var left []*slot
	for id, sl := range s.m {
		if sl.promptID == promptID {
			delete(s.m, id)
			left = append(left, sl)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(left, func(a, b *slot) int { return cmp.Compare(a.n, b.n) })
	for _, sl := range left {
		if sl.wait != nil {
			sl.wait <- slotResult{err: agent.ErrTurnDone}
		}
		s.sendClear(sl)
	}
}
