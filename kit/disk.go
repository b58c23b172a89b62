package kit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// limits.disk. A session's files are those in its directories (work,
// input, output) plus, where it has a mount namespace, its private /tmp
// and /dev/shm. While a prompt runs the kit watches their size, often
// enough that a fast writer is stopped near the limit: over it, every
// process of the session is killed and the prompt ends with a LimitError
// naming limits.disk. Between prompts nothing is watched. A prompt that
// starts over the limit (files a stopped prompt left) may shrink them, not
// grow them; its end is checked as any prompt's: over the limit, it fails.

// errDiskLimit is the cause that ends a prompt whose session went over
// limits.disk.
var errDiskLimit = errors.New("kit: the session went over limits.disk")

// How often a running prompt's files are measured: at most every
// diskPollMin, at least every diskPollMax, and never spending more than
// about 1/diskPollCost of the time measuring (a session with many files
// is measured less often). Sooner when the files grow fast towards the
// limit.
const (
	diskPollMin  = 10 * time.Millisecond
	diskPollMax  = 250 * time.Millisecond
	diskPollCost = 20
)

// diskUsed is the size of the session's files (sandbox.Session.DiskUsed):
// its directories and its private temporary files.
func (ss *session) diskUsed() int64 {
	used, err := ss.workspace.info.Sandbox.DiskUsed()
	if err != nil {
		ss.logger().Warn("measuring the session's files", "err", err)
	}
	return used
}

// checkDisk fails when the session's files hold more than limits.disk.
func (ss *session) checkDisk() error {
	limit := ss.srv.diskLimit
	if limit <= 0 || ss.workspace.info == nil {
		return nil
	}
	used := ss.diskUsed()
	if used <= limit {
		return nil
	}
	return codeErr(protocol.CodeLimit, fmt.Errorf("the session's files (its directories, /tmp and /dev/shm) hold %s, over limits.disk (%s): delete files (or /clear-workspace) before the next prompt", protocol.FormatSize(used), protocol.FormatSize(limit)))
}

// diskWatch measures a running prompt's session files and stops the
// session when they go over limits.disk.
type diskWatch struct {
	ss     *session
	limit  int64 // the larger of limits.disk and the size when the prompt began
	cancel context.CancelCauseFunc
	stop   chan struct{}
	wg     sync.WaitGroup
	used   int64 // the size that stopped the session; 0: never over
}

// watchDisk starts watching the session's files for the prompt whose
// context cancel ends; nil when the box has no disk limit.
func (ss *session) watchDisk(cancel context.CancelCauseFunc) *diskWatch {
	limit := ss.srv.diskLimit
	if limit <= 0 || ss.workspace.info == nil {
		return nil
	}
	w := &diskWatch{ss: ss, limit: limit, cancel: cancel, stop: make(chan struct{})}
	used := ss.diskUsed()
	w.limit = max(limit, used)
	w.wg.Add(1)
	go w.loop(used)
	return w
}

func (w *diskWatch) loop(used int64) {
	defer w.wg.Done()
	t := time.NewTimer(diskPollMin)
	defer t.Stop()
	last, lastAt, prev := used, time.Now(), diskPollMin
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		used := w.ss.diskUsed()
		now := time.Now()
		cost := now.Sub(start)
		if used > w.limit {
			w.used = used
			w.cancel(errDiskLimit)
			// At once, and everything: the agent's own grace period
			// would let a writer go on.
			w.ss.workspace.info.Sandbox.KillAll()
			return
		}
		// Slower as measuring costs more, but never more than twice as
		// slow at a time: one slow walk (the machine was busy) must not
		// leave a fast writer unwatched.
		next := min(max(diskPollMin, diskPollCost*cost), diskPollMax, 2*prev)
		if grew := used - last; grew > 0 {
			// At the rate just seen, half the time left to the limit.
			rate := float64(grew) / float64(now.Sub(lastAt))
			left := time.Duration(float64(w.limit-used) / rate / 2)
			next = max(min(next, left), diskPollMin)
		}
		last, lastAt, prev = used, now, next
		t.Reset(next)
	}
}

// end stops watching and returns the error that ends the prompt when the
// session went over the limit, else nil. w may be nil.
func (w *diskWatch) end() error {
	if w == nil {
		return nil
	}
	close(w.stop)
	w.wg.Wait()
	if w.used == 0 {
		return nil
	}
	return codeErr(protocol.CodeLimit, fmt.Errorf("the prompt was stopped: the session's files (its directories, /tmp and /dev/shm) grew to %s, over limits.disk (%s); every process of the session was killed. Delete files (or /clear-workspace) to make room", protocol.FormatSize(w.used), protocol.FormatSize(w.ss.srv.diskLimit)))
}
