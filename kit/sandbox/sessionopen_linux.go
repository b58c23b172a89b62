package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Opening a session: its uid, its directories and temporary directory,
// and the files the kit gives it.

// Open makes the sandbox of session id, whose writable directories are
// dirs (which must exist): they are given to the session's uid, mode 0700.
// The caller removes them. OpenSession makes and removes them itself.
func (sb *Sandbox) Open(id string, dirs []string) (*Session, error) {
	if sb.mon != nil {
		return nil, errors.New("sandbox: a front opens sessions with OpenSession: the monitor makes their directories")
	}
	return sb.open(id, sessionDirs{paths: dirs}, false)
}

// OpenSession makes session id's directories under Config.SessionRoots
// and its sandbox. Dirs lists them; Close removes them (not the roots,
// with SharedDirs). In a front (Dial) the monitor does both.
func (sb *Sandbox) OpenSession(id string) (*Session, error) {
	if !validID(id) {
		return nil, fmt.Errorf("sandbox: session id %q cannot name a directory", id)
	}
	if sb.mon != nil {
		return sb.mon.open(sb, id)
	}
	d, err := sb.makeDirs(id)
	if err != nil {
		return nil, err
	}
	return sb.open(id, d, true)
}

// open makes the sandbox of session id over its directories d, made by
// the sandbox (owned: held open and removed with the session) or not.
func (sb *Sandbox) open(id string, d sessionDirs, owned bool) (*Session, error) {
	ss := &Session{sb: sb, id: id, dirs: d.list(), held: d, ownsDirs: owned, uid: -1, slot: -1, procs: map[*Process]struct{}{}}
	switch {
	case sb.users && sb.cfg.SharedDirs:
		ss.uid = sb.cfg.UIDBase
	case sb.users:
		slot, err := sb.takeSlot()
		if err != nil {
			if owned {
				_ = sb.removeDirs(id)
			}
			d.close()
			return nil, err
		}
		ss.slot, ss.uid = slot, sb.cfg.UIDBase+slot
		// Where nothing but the uid holds a session's processes, a uid
		// that a dead session left processes under is not handed out
		// dirty: whatever still runs under it goes first.
		if sb.uidOnly() {
			killUID(ss.uid)
		}
	}
	if err := ss.giveDirs(); err != nil {
		ss.Close()
		return nil, err
	}
	if err := ss.makeTmp(); err != nil {
		ss.Close()
		return nil, err
	}
	// The cgroup is made with the first supervisor (supervisor): a
	// session whose agent never starts a process (a Go agent in the kit's
	// own process) costs no cgroup.
	return ss, nil
}

// giveDirs gives the session's directories to its uid: through the
// descriptors the sandbox holds where it made them, else by path.
func (ss *Session) giveDirs() error {
	if ss.held.fds != nil {
		return ss.sb.giveDirs(ss.held, ss.uid)
	}
	if ss.uid >= 0 {
		for _, d := range ss.dirs {
			if err := os.Chown(d, ss.uid, ss.uid); err != nil {
				return fmt.Errorf("sandbox: give %s to the session: %w", d, err)
			}
		}
	}
	for _, d := range ss.dirs {
		if err := os.Chmod(d, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}

// Dirs are the session's directories as OpenSession made them, one per
// Config.SessionRoots entry ("" where that root is ""); nil for a session
// made by Open.
func (ss *Session) Dirs() []string {
	if ss == nil || !ss.ownsDirs {
		return nil
	}
	return ss.held.paths
}

// openTmpRoot makes Config.TmpRoot, where sessions have no mount
// namespace (whose /tmp is private) and holds it open: what it held
// before is the sessions' of an earlier kit process, all ended.
func (sb *Sandbox) openTmpRoot() error {
	root := sb.cfg.TmpRoot
	if root == "" || sb.cloneMask&syscall.CLONE_NEWNS != 0 {
		return nil
	}
	// Traversable, not listable: sessions reach their own only.
	if err := os.MkdirAll(root, 0o711); err != nil {
		return fmt.Errorf("sandbox: make the sessions' temporary directories: %w", err)
	}
	if err := os.Chmod(root, 0o711); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: open the sessions' temporary directories: %w", err)
	}
	sb.tmpRoot = fd
	return nil
}

// makeTmp makes the session's private temporary directory under the
// held TmpRoot, if the sandbox has one.
func (ss *Session) makeTmp() error {
	root := ss.sb.tmpRoot
	if root < 0 {
		return nil
	}
	if !validID(ss.id) {
		return fmt.Errorf("sandbox: session id %q cannot name a directory", ss.id)
	}
	// Left by a session of the same id that a killed kit never closed.
	_ = os.RemoveAll(filepath.Join(fdPath(root), ss.id))
	if err := unix.Mkdirat(root, ss.id, 0o700); err != nil {
		return fmt.Errorf("sandbox: make the session's temporary directory: %w", err)
	}
	ss.tmp = filepath.Join(ss.sb.cfg.TmpRoot, ss.id)
	if ss.uid >= 0 {
		if err := chownBeneath(root, ss.id, ss.uid, ss.uid); err != nil {
			return fmt.Errorf("sandbox: give %s to the session: %w", ss.tmp, err)
		}
	}
	return nil
}

// TmpDir is the session's private temporary directory (its commands'
// TMPDIR), or "" when it has none of its own: with a mount namespace its
// /tmp is private.
func (ss *Session) TmpDir() string {
	if ss == nil {
		return ""
	}
	return ss.tmp
}

func (sb *Sandbox) takeSlot() (int, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if n := len(sb.free); n > 0 {
		s := sb.free[n-1]
		sb.free = sb.free[:n-1]
		return s, nil
	}
	if sb.next >= sb.cfg.UIDCount {
		return 0, fmt.Errorf("sandbox: all %d session uids are in use (sandbox.uid_count)", sb.cfg.UIDCount)
	}
	sb.next++
	return sb.next - 1, nil
}

// UID is the session's uid, or -1 when it runs as the kit's.
func (ss *Session) UID() int {
	if ss == nil {
		return -1
	}
	return ss.uid
}

// Chown gives path (not following a last symbolic link) to the session's
// uid; without a uid of its own it does nothing.
//
// In a session OpenSession made, path must be a regular file with one
// link in one of the session's directories, resolved without following
// any symbolic link: in a front, the monitor gives it.
func (ss *Session) Chown(path string) error {
	if ss == nil || ss.uid < 0 {
		return nil
	}
	if ss.sb.mon != nil {
		return ss.sb.mon.chown(ss, path)
	}
	if !ss.ownsDirs {
		return os.Lchown(path, ss.uid, ss.uid)
	}
	for i, d := range ss.held.paths {
		rel, err := filepath.Rel(d, path)
		if d == "" || err != nil || rel == "." || !filepath.IsLocal(rel) {
			continue
		}
		if err := giveFile(ss.held.fds[i], rel, ss.uid); err != nil {
			return fmt.Errorf("sandbox: give %s to the session: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("sandbox: %s is not in the session's directories", path)
}

// Clear empties the session's work directory (the first of
// Config.SessionRoots), not following symbolic links: in a front, the
// monitor does, since the front cannot remove what the session's
// processes made.
func (ss *Session) Clear() error {
	if ss.sb.mon != nil {
		return ss.sb.mon.simple(opClear, ss.id)
	}
	if len(ss.held.fds) == 0 || ss.held.fds[0] < 0 {
		return nil
	}
	if err := clearDir(ss.held.fds[0]); err != nil {
		return fmt.Errorf("sandbox: clear the work directory: %w", err)
	}
	return nil
}
