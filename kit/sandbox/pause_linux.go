package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Pausing a session freezes every process it has (its agent, its
// supervisor, what they started) through its cgroup's freezer: they keep
// their memory and open files but get no CPU, and none of them can tell
// (no signal is sent). Waking thaws them. The kit pauses a session no
// client is attached to and that runs no prompt; whatever needs the
// session's processes again (a command, the session helper, KillAll,
// Close) wakes it first.

// ErrCannotPause: the session has no cgroup with a freezer (cgroup v2,
// or v1's freezer controller), so its processes cannot be paused.
var ErrCannotPause = errors.New("sandbox: the session has no cgroup freezer (cgroup v2, or v1's freezer controller)")

// freezeWait bounds how long freezing or thawing may take.
const freezeWait = 5 * time.Second

// Pause freezes the session's processes. A paused session stays so
// until Wake or until something needs its processes.
func (ss *Session) Pause() error {
	ss.pauseMu.Lock()
	defer ss.pauseMu.Unlock()
	if ss.paused {
		return nil
	}
	ss.mu.Lock()
	closed, cg := ss.closed, ss.cg
	ss.mu.Unlock()
	if closed {
		return errors.New("sandbox: the session has ended")
	}
	var err error
	switch {
	case ss.sb.mon != nil:
		err = ss.sb.mon.simple(opPause, ss.id)
	case cg == nil || !cg.canFreeze():
		err = ErrCannotPause
	default:
		err = cg.freeze(true)
	}
	if err == nil {
		ss.paused = true
	}
	return err
}

// Wake thaws a paused session's processes; a session not paused is left
// as it is.
func (ss *Session) Wake() error {
	ss.pauseMu.Lock()
	defer ss.pauseMu.Unlock()
	return ss.wakeLocked()
}

func (ss *Session) wakeLocked() error {
	if !ss.paused {
		return nil
	}
	var err error
	if ss.sb.mon != nil {
		err = ss.sb.mon.simple(opWake, ss.id)
	} else {
		ss.mu.Lock()
		cg := ss.cg
		ss.mu.Unlock()
		err = cg.freeze(false)
	}
	if err == nil {
		ss.paused = false
	}
	return err
}

// Paused reports whether the session's processes are frozen.
func (ss *Session) Paused() bool {
	if ss == nil {
		return false
	}
	ss.pauseMu.Lock()
	defer ss.pauseMu.Unlock()
	return ss.paused
}

// woken wakes the session before something that needs its processes,
// and says why it could not.
func (ss *Session) woken() error {
	if err := ss.Wake(); err != nil {
		return fmt.Errorf("sandbox: wake the paused session: %w", err)
	}
	return nil
}

// canFreeze reports whether the cgroup has a freezer.
func (c *cgroup) canFreeze() bool {
	if c.cg.version == "v2" {
		_, err := os.Stat(filepath.Join(c.dirs[""], "cgroup.freeze"))
		return err == nil
	}
	return c.dirs["freezer"] != ""
}

// freeze freezes (on) or thaws the cgroup's processes and waits until
// the kernel says it is done.
func (c *cgroup) freeze(on bool) error {
	var file, value, done string
	if c.cg.version == "v2" {
		file, value, done = filepath.Join(c.dirs[""], "cgroup.freeze"), "0", "frozen 0"
		if on {
			value, done = "1", "frozen 1"
		}
	} else {
		if c.dirs["freezer"] == "" {
			return ErrCannotPause
		}
		file, value, done = filepath.Join(c.dirs["freezer"], "freezer.state"), "THAWED", "THAWED"
		if on {
			value, done = "FROZEN", "FROZEN"
		}
	}
	deadline := time.Now().Add(freezeWait)
	for {
		if err := os.WriteFile(file, []byte(value), 0); err != nil {
			return fmt.Errorf("sandbox: write %s: %w", file, err)
		}
		state := file
		if c.cg.version == "v2" {
			state = filepath.Join(c.dirs[""], "cgroup.events")
		}
		b, err := readSmall(state)
		if err != nil {
			return fmt.Errorf("sandbox: read %s: %w", state, err)
		}
		if strings.Contains(string(b), done) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: the session's cgroup did not reach %q within %v", done, freezeWait)
		}
		// v1 passes through FREEZING while tasks stop; writing again
		// moves on the tasks that were busy.
		time.Sleep(time.Millisecond)
	}
}
