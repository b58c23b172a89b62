package kit

import (
	"errors"
	"fmt"
	"os"

	"github.com/glovebox-dev/glovebox/kit/fsapi"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// helperFiles is kit/fsapi's Files on a session's helper: its errors
// are kit/sandbox's, wrapped in fsapi's where fsapi tells them apart.
type helperFiles struct{ h *sandbox.Helper }

var _ fsapi.Files = helperFiles{}

// sessionFiles is the files of the session whose sandbox is box, done as
// the session by its helper.
func sessionFiles(box *sandbox.Session) (fsapi.Files, error) {
	h, err := box.Helper()
	if err != nil {
		return nil, fmt.Errorf("start the session's helper: %w", err)
	}
	return helperFiles{h}, nil
}

// wrap adds fsapi's sentinel to an error of the helper.
func wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandbox.ErrOutside):
		return fmt.Errorf("%w: %w", fsapi.ErrOutside, err)
	case errors.Is(err, sandbox.ErrSpecial):
		return fmt.Errorf("%w: %w", fsapi.ErrSpecial, err)
	case errors.Is(err, sandbox.ErrHelperGone):
		return fmt.Errorf("%w: %w", fsapi.ErrBusy, err)
	}
	return err
}

func (f helperFiles) Open(root int, rel string, flags int, perm uint32) (*os.File, error) {
	file, err := f.h.Open(sandbox.Root(root), rel, flags, perm)
	return file, wrap(err)
}

func (f helperFiles) Mkdir(root int, rel string, perm uint32) error {
	return wrap(f.h.Mkdir(sandbox.Root(root), rel, perm))
}

func (f helperFiles) MkdirAll(root int, rel string, perm uint32) error {
	return wrap(f.h.MkdirAll(sandbox.Root(root), rel, perm))
}

func (f helperFiles) Rename(root int, from string, toRoot int, to string) error {
	return wrap(f.h.Rename(sandbox.Root(root), from, sandbox.Root(toRoot), to))
}

func (f helperFiles) Remove(root int, rel string) error {
	return wrap(f.h.Remove(sandbox.Root(root), rel))
}

func (f helperFiles) RemoveAll(root int, rel string) error {
	return wrap(f.h.RemoveAll(sandbox.Root(root), rel))
}

func (f helperFiles) Watch(ino *os.File, root int, rel string, mask uint32) (int, error) {
	wd, err := f.h.Watch(ino, sandbox.Root(root), rel, mask)
	return wd, wrap(err)
}
