package kit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A kit holds its state directory for as long as it serves: a second kit
// on the same state (two containers on one volume, a restart that does
// not wait for the old process) would reclaim the first one's sessions
// at boot, persistent ones included, and both would write its ledger and
// store. The lock is a POSIX record lock on <state>/kit.lock, held by the
// process that serves (the monitor where privileges are separated) and
// released by the kernel when it exits however it exits. A kit in the
// same process (tests, an embedding program) is not refused: POSIX
// locks are per process.

// lockState takes the state directory's lock, or says which process
// holds it.
func lockState(stateDir string) (*os.File, error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, nil // the boot's directory checks report it
	}
	p := filepath.Join(stateDir, "kit.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: open its lock: %w", stateDir, err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			holder := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
			who := "another process"
			if unix.FcntlFlock(f.Fd(), unix.F_GETLK, &holder) == nil && holder.Pid > 0 {
				who = fmt.Sprintf("process %d", holder.Pid)
			}
			f.Close()
			return nil, fmt.Errorf("state dir %s is in use by another kit (%s): two kits on one state directory would reclaim each other's sessions; give each kit its own (--state-dir, GLOVEBOX_STATE_DIR, or its own volume)", stateDir, who)
		}
		f.Close()
		return nil, fmt.Errorf("state dir %s: lock it: %w", stateDir, err)
	}
	return f, nil
}
