package kit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// prompts is a session's prompt queue and its runner: the prompts the
// client sent wait here and run one at a time, in order, on a runner
// goroutine that lingers a moment after the queue empties.
type prompts struct {
	ss *session

	mu      sync.Mutex
	queue   []*promptRun
	running *promptRun
	turnNow atomic.Pointer[turn] // the running prompt's turn, for egress events
	wake    chan struct{}        // tells a lingering runner a prompt was queued; made with the first runner
	// finished holds the ids of the latest prompts that ended, for a
	// session whose client can resume: a client that resends a prompt it
	// wrote into a dropped socket must not run it twice.
	finished []string
	runner   bool           // a runner goroutine runs
	ended    bool           // the session has ended: no more prompts
	wg       sync.WaitGroup // the runner
}

// promptRun is a prompt in the queue or running.
type promptRun struct {
	msg     *protocol.Prompt
	cancel  context.CancelCauseFunc // set when it starts
	started time.Time               // set when it starts
}

// runnerLinger is how long a runner whose queue is empty waits for the next
// prompt before it exits (Server.runnerLinger, which tests shorten). A new
// goroutine per prompt would grow its stack through the agent's and the
// writer's call chains every time; a session that has not prompted for a
// while holds no goroutine at all.
const runnerLinger = 2 * time.Second

// maxFinished bounds the ids a resumable session remembers.
const maxFinished = 256

// enqueue queues a prompt, or answers it with an error at once.
func (q *prompts) enqueue(m *protocol.Prompt) {
	ss := q.ss
	q.mu.Lock()
	if q.ended {
		q.mu.Unlock()
		return
	}
	dup := q.running != nil && q.running.msg.ID == m.ID
	for _, p := range q.queue {
		dup = dup || p.msg.ID == m.ID
	}
	if dup {
		q.mu.Unlock()
		ss.stream.sendError(context.Background(), m.ID, protocol.CodeDuplicateID,
			fmt.Sprintf("prompt id %q is already queued or running on this session: use a new id", m.ID))
		return
	}
	if slices.Contains(q.finished, m.ID) {
		q.mu.Unlock()
		ss.stream.sendError(context.Background(), m.ID, protocol.CodeDuplicateID,
			fmt.Sprintf("prompt id %q already ran on this session: use a new id", m.ID))
		return
	}
	if ss.srv.drain.draining.Load() {
		q.mu.Unlock()
		ss.stream.sendError(context.Background(), m.ID, protocol.CodeDraining,
			fmt.Sprintf("prompt %q refused: %s", m.ID, drainMessage))
		return
	}
	if len(q.queue) >= ss.srv.maxQueue {
		q.mu.Unlock()
		ss.stream.sendError(context.Background(), m.ID, protocol.CodeQueueFull,
			fmt.Sprintf("prompt %q refused: %d prompts are already queued on this session", m.ID, len(q.queue)))
		return
	}
	q.queue = append(q.queue, &promptRun{msg: m})
	if ss.observed() {
		ss.obs.queued(m.ID, m.Text, sortedKeys(m.Inputs))
	}
	start := !q.runner
	if start {
		q.runner = true
		if q.wake == nil {
			q.wake = make(chan struct{}, 1)
		}
		q.wg.Add(1)
		ss.srv.wg.Add(1)
	}
	wake := q.wake
	q.mu.Unlock()
	if start {
		go q.runLoop()
		return
	}
	select {
	case wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// abort cancels the running prompt with that id, or removes it from the
// queue (it then gets its error at once and never runs). It reports
// whether the prompt was running or queued.
func (q *prompts) abort(id string) bool {
	ss := q.ss
	q.mu.Lock()
	if r := q.running; r != nil && r.msg.ID == id {
		r.cancel(errAborted)
		q.mu.Unlock()
		return true
	}
	for i, p := range q.queue {
		if p.msg.ID == id {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			q.mu.Unlock()
			ss.srv.drain.notePromptEnded()
			ss.stream.sendError(context.Background(), id, protocol.CodeAborted, abortMessage)
			return true
		}
	}
	q.mu.Unlock()
	ss.logger().Debug("abort of an unknown prompt ignored", "id", id)
	return false
}

// runLoop runs queued prompts one at a time, and exits once the queue has
// stayed empty for its linger or the session ends.
func (q *prompts) runLoop() {
	ss := q.ss
	defer ss.srv.wg.Done()
	defer q.wg.Done()
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	for {
		q.mu.Lock()
		if q.ended {
			q.runner = false
			q.mu.Unlock()
			return
		}
		if len(q.queue) == 0 {
			q.mu.Unlock()
			if idle == nil {
				idle = time.NewTimer(ss.srv.runnerLinger)
			} else {
				idle.Reset(ss.srv.runnerLinger)
			}
			select {
			case <-q.wake:
				continue
			case <-ss.ctx.Done():
			case <-idle.C:
			}
			q.mu.Lock()
			if q.ended || ss.ctx.Err() != nil || len(q.queue) == 0 {
				q.runner = false
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			continue
		}
		p := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		ctx, cancel := context.WithCancelCause(ss.ctx)
		p.cancel = cancel
		p.started = time.Now()
		q.running = p
		q.mu.Unlock()
		if ss.observed() {
			ss.obs.running(p.msg.ID)
		}

		ss.runPrompt(ctx, p, func() {
			q.mu.Lock()
			q.running = nil
			if ss.stream.resumable() {
				if len(q.finished) == maxFinished {
					q.finished = append(q.finished[:0], q.finished[1:]...)
				}
				q.finished = append(q.finished, p.msg.ID)
			}
			q.mu.Unlock()
		})
		cancel(nil)
		ss.srv.drain.notePromptEnded()
	}
}

// load returns how many prompts wait in the queue and the running one
// (nil when none runs); its msg and started do not change while it runs.
func (q *prompts) load() (queued int, running *promptRun) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue), q.running
}

// stop takes no more prompts and cancels the running one with cause. It
// returns the prompts still queued, which never run: the caller answers
// them (refuse) once the session's context is cancelled.
func (q *prompts) stop(cause error) []*promptRun {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	queued := q.queue
	q.queue = nil
	if q.running != nil {
		q.running.cancel(cause)
	}
	return queued
}

// refuse answers the prompts stop took from the queue with their error.
func (q *prompts) refuse(queued []*promptRun) {
	for _, p := range queued {
		q.ss.stream.sendError(context.Background(), p.msg.ID, protocol.CodeAborted, abortMessage)
	}
}
