package snapshot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Root is one of a session's directories, by index: 0 work, 1 input,
// 2 output (as the session's sandbox lists them).
type Root int

// rootNames are the roots' names in a manifest, by index.
var rootNames = [...]string{protocol.SnapshotRootWork, protocol.SnapshotRootInput, protocol.SnapshotRootOutput}

// Roots says which roots a session has.
type Roots [len(rootNames)]bool

func rootIndex(name string) (Root, bool) {
	for i, n := range rootNames {
		if n == name {
			return Root(i), true
		}
	}
	return 0, false
}

// FS reaches a session's directories. Paths are slash paths relative to
// a root ("." is the root itself), resolved beneath it: an escaping path
// or symlink fails, and a final symlink is never followed. The kit's
// implementation is the session's helper (kit/sandbox), which does this
// as the session.
type FS interface {
	// Open is open(2) of root/rel with flags and perm.
	Open(root Root, rel string, flags int, perm uint32) (*os.File, error)
	Mkdir(root Root, rel string, perm uint32) error
	// RemoveAll removes rel and what it holds; never the root itself.
	RemoveAll(root Root, rel string) error
	// Rename is rename(2) of root/from to root/to.
	Rename(root Root, from, to string) error
}

// AttrFS is an FS that sets modes and times itself: the kit's, whose
// helper does it as the session, where the kit (an unprivileged front)
// may not change a file the session owns through the descriptor it was
// handed. A restore uses it when its FS has it.
type AttrFS interface {
	// Chmod sets root/rel's permission bits; a symbolic link is refused.
	Chmod(root Root, rel string, perm uint32) error
	// Chtimes sets root/rel's access and modification times to t.
	Chtimes(root Root, rel string, t time.Time) error
}

// DirFS is an FS over plain directories, by root index ("" where there is
// none): for tests and tools that work on directories the caller owns.
// It resolves paths with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS)
// and opens a final symlink as itself.
type DirFS []string

var _ FS = DirFS(nil)

func (d DirFS) dir(root Root) (string, error) {
	if int(root) < 0 || int(root) >= len(d) || d[root] == "" {
		return "", fmt.Errorf("snapshot: no root %d", root)
	}
	return d[root], nil
}

// Open implements FS. Special files are refused unless flags hold O_PATH.
func (d DirFS) Open(root Root, rel string, flags int, perm uint32) (*os.File, error) {
	dir, err := d.dir(root)
	if err != nil {
		return nil, err
	}
	rfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(rfd)
	special := flags&unix.O_PATH == 0
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Mode:    uint64(perm),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if special {
		how.Flags |= unix.O_NONBLOCK // a fifo must not block the open
	}
	fd, err := unix.Openat2(rfd, rel, &how)
	if err != nil {
		if errors.Is(err, unix.EXDEV) {
			err = fmt.Errorf("%w: %w", ErrOutside, err)
		}
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	if special {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "stat", Path: rel, Err: err}
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
			unix.Close(fd)
			return nil, &fs.PathError{Op: "open", Path: rel, Err: ErrSpecial}
		}
		if flags&unix.O_NONBLOCK == 0 {
			unix.SetNonblock(fd, false)
		}
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, rel)), nil
}

// Mkdir implements FS.
func (d DirFS) Mkdir(root Root, rel string, perm uint32) error {
	parent, base := splitRel(rel)
	pf, err := d.Open(root, parent, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer pf.Close()
	if err := unix.Mkdirat(int(pf.Fd()), base, perm); err != nil {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	return nil
}

// RemoveAll implements FS.
func (d DirFS) RemoveAll(root Root, rel string) error {
	dir, err := d.dir(root)
	if err != nil {
		return err
	}
	if rel == "." || rel == "" {
		return errors.New("snapshot: RemoveAll of a root")
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.RemoveAll(filepath.FromSlash(rel))
}

// Rename implements FS.
func (d DirFS) Rename(root Root, from, to string) error {
	dir, err := d.dir(root)
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Rename(filepath.FromSlash(from), filepath.FromSlash(to))
}

// ErrOutside and ErrSpecial are DirFS's: a path that leaves its root, a
// special file opened without O_PATH.
var (
	ErrOutside = errors.New("snapshot: path leaves its root")
	ErrSpecial = errors.New("snapshot: special file")
)

// splitRel splits a slash path into its parent ("." for the root) and
// its last element.
func splitRel(rel string) (parent, base string) {
	for i := len(rel) - 1; i >= 0; i-- {
		if rel[i] == '/' {
			return rel[:i], rel[i+1:]
		}
	}
	return ".", rel
}
