package kit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/egress"
)

// Causes of a prompt's cancellation.
var (
	errAborted = errors.New("kit: prompt aborted")
	errClosed  = errors.New("kit: connection closed")
	errTimeout = errors.New("kit: prompt timed out")
)

// abortMessage is v1's message for an aborted prompt.
const abortMessage = "This operation was aborted"

// session is one client's state. It holds the session's identity, its
// context, its counters and its logger, and composes four parts, each
// with its own state and lock:
//
//   - stream: the numbered frames and the connection they go to (stream.go);
//   - prompts: the prompt queue and its runner (queue.go; one prompt's run
//     is run.go, its turn as the agent sees it turn.go);
//   - slots: the display slots its prompts pushed (slots.go);
//   - workspace: its directories and sandbox, inputs in, outputs out
//     (workspace.go, inputs.go, outputs.go).
//
// A session usually lives as long as its connection (ws.go); a resumable
// session outlives a dropped one for the resume grace period.
type session struct {
	srv   *Server
	id    string
	owner string // the identity of the credential that opened it
	// mayReadFile reports whether the credential that opened the session
	// may read a parked file by GET /files/{id} (the key, or a files-scope
	// token that names the id or no ids).
	mayReadFile func(id string) bool

	// What the operator routes, /metrics and the log lines report.
	created    time.Time
	opened     atomic.Bool  // attached to its first connection
	lastActive atomic.Int64 // unix nanoseconds of the last frame either way
	promptsRun atomic.Int64 // prompts that ended
	framesSent atomic.Int64
	eventsSent atomic.Int64
	bytesSent  atomic.Int64
	exitCode   atomic.Int64 // the running prompt's exit event's code, noExit when none

	// pauseMu orders pausing the session's processes and waking them
	// (pause.go).
	pauseMu sync.Mutex
	using   atomic.Int32 // requests to the session's own features (pause.go)
	persist persistence  // sessions.persist (persist.go)
	// resumable is the agent's conversation where the agent can name it
	// (agent.Resumable), for snapshots and persistent sessions.
	resumable atomic.Pointer[agent.Resumable]

	logOnce sync.Once
	log     *slog.Logger
	ctx     context.Context // ends with the session

	cancel  context.CancelCauseFunc
	endOnce sync.Once

	stream    stream
	prompts   prompts
	slots     slots
	workspace workspace // owned by the runner goroutine (and end, after the runner is gone)
	// conv is the agent's conversation, opened on the workspace by the
	// first prompt (or a warm-up); owned as the workspace is.
	conv agent.Conversation

	obs observers // the inspector's view (observe.go); empty when it is off
	// egressRules are the session's own egress rules (egress_session.go).
	egressRules egress.SessionRules
	warmLost    []<-chan struct{} // a warm session's: closed when it is no longer warm
}

// logger returns the session's logger, made on first use: most idle
// sessions never log.
func (ss *session) logger() *slog.Logger {
	ss.logOnce.Do(func() { ss.log = ss.srv.log.With("session", ss.id) })
	return ss.log
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) newSession() *session {
	ss := &session{srv: s, id: s.machineID(newSessionID()), created: time.Now()}
	ss.lastActive.Store(ss.created.UnixNano())
	ss.stream.ss = ss
	ss.prompts.ss = ss
	ss.slots.ss = ss
	ss.workspace.ss = ss
	ss.stream.replay.total, ss.stream.replay.limit = &s.budget.replayBytes, s.budget.replayCap
	ss.obs.started = time.Now()
	if s.inspect != nil {
		ss.obs.total = &s.budget.observed
	}
	ss.ctx, ss.cancel = context.WithCancelCause(s.ctx)
	return ss
}

// reserve registers a new session for the credential who unless the box
// is closed or full. A warm session is taken when there is one.
func (s *Server) reserve(who string) *session {
	s.mu.Lock()
	full := s.closed || len(s.sessions) >= s.maxSessions
	s.mu.Unlock()
	var ss *session
	if !full {
		ss = s.warm.take()
	}
	if ss == nil {
		ss = s.newSession()
	}
	ss.owner = who // before the session is visible to the inspector
	s.mu.Lock()
	if s.closed || len(s.sessions) >= s.maxSessions {
		s.mu.Unlock()
		ss.end(errClosed) // its context would stay in the server's until Close
		return nil
	}
	s.sessions[ss.id] = ss
	s.wg.Add(1) // the connection's handler goroutine
	s.mu.Unlock()
	return ss
}

// end cancels everything the session runs, waits for its prompt to
// return, closes the agent's conversation and removes the session's
// directories. Safe to call more than once.
func (ss *session) end(cause error) {
	ss.endOnce.Do(func() {
		queued := ss.prompts.stop(cause)
		ss.cancel(cause)
		ss.prompts.refuse(queued)
		ss.prompts.wg.Wait()

		ss.stream.end()

		if ss.conv != nil {
			if err := ss.conv.Close(); err != nil {
				ss.logger().Warn("closing the agent's conversation", "err", err)
			}
		}
		// A persistent session outlives the kit's stop: its directories
		// and record stay for the next boot (persist.go).
		keep := ss.persistent() && errors.Is(cause, errShutdown)
		if keep {
			ss.stream.mu.Lock()
			seq := ss.stream.seq
			ss.stream.mu.Unlock()
			ss.saveRecord(seq)
		} else if ss.persistent() {
			ss.srv.forgetSession(ss.id)
		}
		ss.workspace.remove(keep)
		ss.srv.removeSession(ss)
		ss.srv.drain.notePromptEnded()
		ss.obs.close()
		if ss.srv.inspect != nil && ss.opened.Load() {
			ss.srv.inspect.Record(ss.inspectRecord(cause))
		}
		if !ss.opened.Load() {
			// A warm session no client took, or a fresh one a resume
			// replaced: it was never opened, so it is not reported closed.
			ss.logger().Debug("unused session discarded", "cause", closeCause(cause))
			return
		}
		ss.logger().Info("session closed", "duration_ms", time.Since(ss.created).Milliseconds(),
			"prompts", ss.promptsRun.Load(), "frames", ss.framesSent.Load(), "events", ss.eventsSent.Load(),
			"bytes", ss.bytesSent.Load(), "cause", closeCause(cause))
	})
}

// closeCause names why a session ended, for its log line.
func closeCause(cause error) string {
	switch {
	case errors.Is(cause, errShutdown):
		return "shutdown"
	case errors.Is(cause, errClosed):
		return "connection closed"
	case cause == nil:
		return "ended"
	}
	return strings.TrimPrefix(cause.Error(), "kit: ")
}
