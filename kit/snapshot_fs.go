package kit

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	snap "github.com/glovebox-dev/glovebox/kit/snapshot"
)

// filesFS is the session's directories as a snapshot.FS, reached through
// the session's helper (as the session: its uid, namespaces, Landlock
// domain), and which of them it has. It makes the directories and
// sandbox if no prompt has yet.
func (ss *session) filesFS() (snap.FS, snap.Roots, error) {
	info, err := ss.sandboxed()
	if err != nil {
		return nil, snap.Roots{}, err
	}
	h, err := info.Sandbox.Helper()
	if err != nil {
		return nil, snap.Roots{}, fmt.Errorf("start the session's helper: %w", err)
	}
	dirs := info.Sandbox.Dirs()
	var roots snap.Roots
	for i := range roots {
		roots[i] = i < len(dirs) && dirs[i] != ""
	}
	return helperFS{h}, roots, nil
}

// helperFS is a snapshot.FS over a session's helper.
type helperFS struct{ h *sandbox.Helper }

var _ snap.FS = helperFS{}

// mapErr makes the helper's sentinels the snapshot package's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandbox.ErrSpecial):
		return fmt.Errorf("%w: %w", snap.ErrSpecial, err)
	case errors.Is(err, sandbox.ErrOutside):
		return fmt.Errorf("%w: %w", snap.ErrOutside, err)
	}
	return err
}

// Open opens through the helper. An open that creates nothing is tried
// again when the helper ended before it answered (the sweep after a
// session's last command ends every process of the session, the helper
// too; the next call starts another): a snapshot taken while a prompt
// ends goes on.
func (f helperFS) Open(root snap.Root, rel string, flags int, perm uint32) (*os.File, error) {
	file, err := f.h.Open(sandbox.Root(root), rel, flags, perm)
	if errors.Is(err, sandbox.ErrHelperGone) && flags&unix.O_CREAT == 0 {
		file, err = f.h.Open(sandbox.Root(root), rel, flags, perm)
	}
	return file, mapErr(err)
}

func (f helperFS) Mkdir(root snap.Root, rel string, perm uint32) error {
	return mapErr(f.h.Mkdir(sandbox.Root(root), rel, perm))
}

func (f helperFS) RemoveAll(root snap.Root, rel string) error {
	return mapErr(f.h.RemoveAll(sandbox.Root(root), rel))
}

var _ snap.AttrFS = helperFS{}

// Chmod sets a mode as the session: the kit's front may not change a
// file the session owns.
func (f helperFS) Chmod(root snap.Root, rel string, perm uint32) error {
	return mapErr(f.h.Chmod(sandbox.Root(root), rel, perm))
}

// Chtimes sets times as the session.
func (f helperFS) Chtimes(root snap.Root, rel string, t time.Time) error {
	return mapErr(f.h.Chtimes(sandbox.Root(root), rel, t))
}

func (f helperFS) Rename(root snap.Root, from, to string) error {
	return mapErr(f.h.Rename(sandbox.Root(root), from, sandbox.Root(root), to))
}
