package fsapi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/kit/fsapi"
)

// localFiles does, as the test's own user, what a session's helper does
// as the session: every path resolved beneath its root by openat2
// (RESOLVE_BENEATH), special files refused. It stands in where a test is
// about the HTTP side alone.
type localFiles struct{ dirs []string }

var _ fsapi.Files = (*localFiles)(nil)

func (l *localFiles) rootFD(root int) (int, error) {
	if root < 0 || root >= len(l.dirs) || l.dirs[root] == "" {
		return -1, fmt.Errorf("root %d: %w", root, os.ErrNotExist)
	}
	return unix.Open(l.dirs[root], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

func (l *localFiles) openat(root int, rel string, flags int, perm uint32) (int, error) {
	rfd, err := l.rootFD(root)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rfd)
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(perm), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, syscall.EXDEV) {
		return -1, &os.PathError{Op: "open", Path: rel, Err: fsapi.ErrOutside}
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return fd, nil
}

func (l *localFiles) Open(root int, rel string, flags int, perm uint32) (*os.File, error) {
	if flags&unix.O_PATH == 0 {
		pfd, err := l.openat(root, rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
		if err == nil {
			var st unix.Stat_t
			unix.Fstat(pfd, &st)
			unix.Close(pfd)
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG, unix.S_IFDIR:
			case unix.S_IFLNK:
				return nil, &os.PathError{Op: "open", Path: rel, Err: syscall.ELOOP}
			default:
				return nil, &os.PathError{Op: "open", Path: rel, Err: fsapi.ErrSpecial}
			}
		}
	}
	fd, err := l.openat(root, rel, flags|unix.O_NOFOLLOW, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// parent opens rel's directory and returns it with rel's last name.
func (l *localFiles) parent(root int, rel string) (int, string, error) {
	dir, base := path.Split(rel)
	fd, err := l.openat(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, base, err
}

func (l *localFiles) Mkdir(root int, rel string, perm uint32) error {
	fd, base, err := l.parent(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, base, perm); err != nil {
		return &os.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	return nil
}

func (l *localFiles) MkdirAll(root int, rel string, perm uint32) error {
	p := ""
	for name := range strings.SplitSeq(rel, "/") {
		p = path.Join(p, name)
		if err := l.Mkdir(root, p, perm); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

func (l *localFiles) Rename(root int, from string, toRoot int, to string) error {
	ffd, fbase, err := l.parent(root, from)
	if err != nil {
		return err
	}
	defer unix.Close(ffd)
	tfd, tbase, err := l.parent(toRoot, to)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	if err := unix.Renameat(ffd, fbase, tfd, tbase); err != nil {
		return &os.PathError{Op: "rename", Path: from, Err: err}
	}
	return nil
}

func (l *localFiles) Remove(root int, rel string) error {
	fd, base, err := l.parent(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	err = unix.Unlinkat(fd, base, 0)
	if errors.Is(err, syscall.EISDIR) {
		err = unix.Unlinkat(fd, base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &os.PathError{Op: "remove", Path: rel, Err: err}
	}
	return nil
}

func (l *localFiles) RemoveAll(root int, rel string) error {
	f, err := l.Open(root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == nil {
		names, _ := f.Readdirnames(-1)
		f.Close()
		for _, n := range names {
			if err := l.RemoveAll(root, path.Join(rel, n)); err != nil {
				return err
			}
		}
	}
	if err := l.Remove(root, rel); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (l *localFiles) Watch(ino *os.File, root int, rel string, mask uint32) (int, error) {
	fd, err := l.openat(root, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	wd, err := unix.InotifyAddWatch(int(ino.Fd()), fmt.Sprintf("/proc/self/fd/%d", fd), mask)
	if err != nil {
		return -1, &os.PathError{Op: "watch", Path: rel, Err: err}
	}
	return wd, nil
}

// localSession is a session whose files are localFiles.
type localSession struct {
	id     string
	ctx    context.Context
	files  *localFiles
	left   int64
	leftFn func() int64
}

func (s *localSession) ID() string               { return s.id }
func (s *localSession) Context() context.Context { return s.ctx }
func (s *localSession) HasRoot(i int) bool {
	return i >= 0 && i < len(s.files.dirs) && s.files.dirs[i] != ""
}
func (s *localSession) Files() (fsapi.Files, error) {
	if s.ctx.Err() != nil {
		return nil, fsapi.ErrEnded
	}
	return s.files, nil
}
func (s *localSession) DiskLeft() (int64, error) {
	if s.leftFn != nil {
		return s.leftFn(), nil
	}
	return s.left, nil
}
