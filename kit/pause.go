package kit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Pausing. A session whose client dropped without a close frame waits for
// a resume (sessions.resume_grace); once it has waited sessions.pause
// (default protocol.DefaultPause) with no prompt running or queued, its
// processes (its agent, what the agent left running) are frozen through
// its cgroup's freezer: they keep their memory and files, use no CPU, and
// cannot tell. A resume, a prompt, or a feature that needs the session's
// processes (a terminal, its files, a preview) wakes it first. GET
// /sessions reports it "paused". Where the session has no cgroup freezer
// (sandbox.ErrCannotPause) it keeps running, as before.
//
// Lifetime. sessions.lifetime ends a session that long after it opened,
// connected or not, after telling its client why.

// armPauseLocked arms the pause of a session that has just been detached
// (gen is its grace generation). st.mu is held.
func (st *stream) armPauseLocked(gen int) {
	srv := st.ss.srv
	if srv.pauseAfter <= 0 || srv.pauseAfter >= srv.resumeGrace {
		return
	}
	srv.wg.Add(1)
	st.pauseTimer = time.AfterFunc(srv.pauseAfter, func() {
		defer srv.wg.Done()
		st.ss.pauseIfIdle(gen)
	})
}

func (st *stream) stopPauseLocked() {
	if st.pauseTimer != nil && st.pauseTimer.Stop() {
		st.ss.srv.wg.Done()
	}
	st.pauseTimer = nil
}

// detachedSince reports whether the session is still the detached one of
// grace generation gen.
func (st *stream) detachedSince(gen int) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.conn.Load() == nil && st.graceGen == gen && st.ss.ctx.Err() == nil
}

// pauseIfIdle pauses the session if it is still detached (generation gen)
// and runs no prompt and serves no request of its own (inUse); while it
// does, it looks again after sessions.pause.
func (ss *session) pauseIfIdle(gen int) {
	ss.pauseMu.Lock()
	defer ss.pauseMu.Unlock()
	if !ss.stream.detachedSince(gen) {
		return
	}
	if queued, running := ss.prompts.load(); queued > 0 || running != nil || ss.using.Load() > 0 {
		ss.stream.mu.Lock()
		if ss.stream.conn.Load() == nil && ss.stream.graceGen == gen {
			ss.stream.armPauseLocked(gen)
		}
		ss.stream.mu.Unlock()
		return
	}
	box := ss.obs.box.Load()
	if box == nil {
		return // nothing runs: no sandbox was ever made
	}
	switch err := box.Pause(); {
	case err == nil:
		ss.srv.obs.SessionsPaused.Add(1)
		ss.logger().Debug("session paused", "after", ss.srv.pauseAfter)
	case errors.Is(err, sandbox.ErrCannotPause):
		ss.logger().Debug("session not paused: " + err.Error())
	default:
		ss.logger().Warn("pausing the session", "err", err)
	}
}

// inUse counts a request to one of the session's own features (a
// terminal, its files, a preview) until the returned func is called:
// meanwhile the session is not paused.
func (ss *session) inUse() func() {
	ss.using.Add(1)
	return func() { ss.using.Add(-1) }
}

// paused reports whether the session's processes are frozen.
func (ss *session) paused() bool {
	box := ss.obs.box.Load()
	return box != nil && box.Paused()
}

// wake thaws the session's processes if they are paused. Whatever needs
// them calls it first.
func (ss *session) wake() error {
	box := ss.obs.box.Load()
	if box == nil || !box.Paused() {
		return nil
	}
	ss.pauseMu.Lock()
	defer ss.pauseMu.Unlock()
	if err := box.Wake(); err != nil {
		ss.logger().Warn("waking the session", "err", err)
		return codeErr(protocol.CodeError, fmt.Errorf("wake the paused session: %w", err))
	}
	ss.logger().Debug("session woken")
	return nil
}

// errLifetime ends a session that reached sessions.lifetime.
var errLifetime = errors.New("kit: the session reached its lifetime")

// limitLifetime ends ss once it has lived sessions.lifetime, telling its
// client first; nothing when the box sets none.
func (s *Server) limitLifetime(ss *session) { s.limitLifetimeFrom(ss, time.Now()) }

// limitLifetimeFrom is limitLifetime for a session that started at
// start.
func (s *Server) limitLifetimeFrom(ss *session, start time.Time) {
	if s.lifetime <= 0 {
		return
	}
	s.wg.Go(func() {
		t := time.NewTimer(max(s.lifetime-time.Since(start), 0))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ss.ctx.Done():
			return
		}
		msg := fmt.Sprintf("the session reached its lifetime (sessions.lifetime = %v) and ends", s.lifetime)
		ss.stream.sendError(context.Background(), "", protocol.CodeLimit, msg)
		ss.logger().Info("session lifetime reached", "lifetime", s.lifetime)
		ss.stream.goingAway()
		ss.end(errLifetime)
	})
}
