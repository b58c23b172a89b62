package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Load reads snapshot id's manifest from st, checks that its bytes hash
// to id, and parses and checks it (Check).
func Load(ctx context.Context, st Store, id string, lim Limits) (*protocol.SnapshotManifest, error) {
	if !protocol.ValidSnapshotID(id) {
		return nil, fmt.Errorf("snapshot %q: not a snapshot id (64 hex digits): %w", id, ErrNotFound)
	}
	b, err := st.Manifest(ctx, id, lim.MaxManifest)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != id {
		return nil, fmt.Errorf("snapshot %s: its manifest's bytes do not hash to its id (tampered with or truncated): %w", id, ErrCorrupt)
	}
	m, err := Decode(b, lim)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return m, nil
}

// Decode parses a manifest and checks it (Check).
func Decode(b []byte, lim Limits) (*protocol.SnapshotManifest, error) {
	var m protocol.SnapshotManifest
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %v: %w", err, ErrCorrupt)
	}
	if err := Check(&m, lim); err != nil {
		return nil, err
	}
	return &m, nil
}

// Check checks a manifest: its version; every entry's root, type, mode
// and clean path; a directory before what it holds, no path twice; each
// file's blob name and size; the sizes' sum and the entries' count within
// lim.
func Check(m *protocol.SnapshotManifest, lim Limits) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("manifest: %s: %w", fmt.Sprintf(format, args...), ErrCorrupt)
	}
	if m.V != protocol.SnapshotManifestVersion {
		return bad("version %d, this kit reads %d", m.V, protocol.SnapshotManifestVersion)
	}
	if len(m.Entries) > lim.MaxEntries {
		return fmt.Errorf("manifest: %d entries, over %d: %w", len(m.Entries), lim.MaxEntries, ErrTooLarge)
	}
	seen := make(map[string]string, len(m.Entries)) // root\x00path: type
	var total int64
	for i, e := range m.Entries {
		if _, ok := rootIndex(e.Root); !ok {
			return bad("entry %d: root %q is not work, input or output", i, e.Root)
		}
		if !cleanRel(e.Path) {
			return bad("entry %d: path %q is not a clean relative path", i, e.Path)
		}
		if e.Mode&^0o7777 != 0 {
			return bad("entry %d (%s): mode %o", i, e.Path, e.Mode)
		}
		key := e.Root + "\x00" + e.Path
		if _, dup := seen[key]; dup {
			return bad("entry %d: %s/%s listed twice", i, e.Root, e.Path)
		}
		if parent, _ := splitRel(e.Path); parent != "." && seen[e.Root+"\x00"+parent] != protocol.SnapshotDir {
			return bad("entry %d: %s/%s comes before its directory", i, e.Root, e.Path)
		}
		seen[key] = e.Type
		switch e.Type {
		case protocol.SnapshotDir:
			if e.Blob != "" || e.Target != "" || e.Size != 0 {
				return bad("entry %d: directory %s has a blob, target or size", i, e.Path)
			}
		case protocol.SnapshotSymlink:
			if e.Target == "" || len(e.Target) > 4095 || strings.IndexByte(e.Target, 0) >= 0 || e.Blob != "" || e.Size != 0 {
				return bad("entry %d: symlink %s: bad target, or a blob", i, e.Path)
			}
		case protocol.SnapshotFile:
			if !validSum(e.Blob) || e.Size < 0 || e.Target != "" {
				return bad("entry %d: file %s: bad blob %q or size %d", i, e.Path, e.Blob, e.Size)
			}
			total += e.Size
			if total > lim.MaxSize || total < 0 {
				return fmt.Errorf("manifest: over %d bytes of files: %w", lim.MaxSize, ErrTooLarge)
			}
		default:
			return bad("entry %d: type %q", i, e.Type)
		}
	}
	if total != m.Size {
		return bad("size %d, its files sum to %d", m.Size, total)
	}
	return nil
}

// CheckImage compares a snapshot's image with the box's (closure hashes):
// another image is ErrImage naming both, unless force, when it is a
// warning saying what may break.
func CheckImage(m *protocol.SnapshotManifest, closure string, force bool) (warning string, err error) {
	if m.ClosureSHA256 == closure {
		return "", nil
	}
	name := func(c string) string {
		if c == "" {
			return "an image of unknown closure"
		}
		return "closure " + c
	}
	if !force {
		return "", fmt.Errorf("snapshot of %s, this box runs %s: restore it on a box of its image, or force it (files restore as they were; programs built against the other image's store paths may not run): %w",
			name(m.ClosureSHA256), name(closure), ErrImage)
	}
	return fmt.Sprintf("restored a snapshot of %s on %s: files are as they were, but programs, virtualenvs or caches in the workspace built against the other image's /nix/store paths may not run", name(m.ClosureSHA256), name(closure)), nil
}

// Verify reads every blob m names (each once) and checks its size and
// hash: a snapshot that passes holds everything a restore will write.
func Verify(ctx context.Context, st Store, m *protocol.SnapshotManifest) error {
	done := map[string]bool{}
	for _, e := range m.Entries {
		if e.Type != protocol.SnapshotFile || done[e.Blob] {
			continue
		}
		if err := verifyBlob(ctx, st, e.Blob, e.Size); err != nil {
			return fmt.Errorf("%s/%s: %w", e.Root, e.Path, err)
		}
		done[e.Blob] = true
	}
	return nil
}

func verifyBlob(ctx context.Context, st Store, sum string, size int64) error {
	r, err := st.OpenBlob(ctx, sum)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("blob %s is missing (a partial snapshot): %w", sum, ErrCorrupt)
		}
		return err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(ctxReader{ctx, r}, size+1))
	if err != nil {
		return fmt.Errorf("read blob %s: %w", sum, err)
	}
	if n != size || hex.EncodeToString(h.Sum(nil)) != sum {
		return fmt.Errorf("blob %s is corrupt (%d bytes, want %d, or its bytes do not hash to its name): %w", sum, n, size, ErrCorrupt)
	}
	return nil
}

// Restore verifies snapshot m (Verify) and then writes it into fsys,
// whose roots must hold none of its entries. Nothing is written when the
// snapshot does not verify; when writing fails, what was written is
// removed. The warnings say what could not be set as it was (modes or
// times an unprivileged writer may not set).
func Restore(ctx context.Context, st Store, m *protocol.SnapshotManifest, fsys FS, roots Roots) ([]string, error) {
	for _, e := range m.Entries {
		if r, _ := rootIndex(e.Root); !roots[r] {
			return nil, fmt.Errorf("the snapshot has files in %s and this box has no %s directory", e.Root, e.Root)
		}
	}
	if err := Verify(ctx, st, m); err != nil {
		return nil, err
	}
	w := &writer{fsys: fsys}
	for _, e := range m.Entries {
		var err error
		if e.Type == protocol.SnapshotFile {
			err = w.file(e, func(dst *os.File) error {
				r, err := st.OpenBlob(ctx, e.Blob)
				if err != nil {
					return err
				}
				defer r.Close()
				h := sha256.New()
				n, err := io.Copy(io.MultiWriter(dst, h), io.LimitReader(ctxReader{ctx, r}, e.Size+1))
				if err == nil && (n != e.Size || hex.EncodeToString(h.Sum(nil)) != e.Blob) {
					err = fmt.Errorf("blob %s changed since it was verified: %w", e.Blob, ErrCorrupt)
				}
				return err
			})
		} else {
			err = w.put(e)
		}
		if err != nil {
			w.undo()
			return nil, fmt.Errorf("restore %s/%s: %w", e.Root, e.Path, err)
		}
	}
	return w.finish(), nil
}

// writer writes entries into an FS, directories before what they hold.
// It remembers what it made, to undo it, and the directories whose modes
// and times it sets last (writing into them changes their times, and a
// read-only one must stay writable until it is full).
type writer struct {
	fsys    FS
	top     []rootPath // the top-level entries made
	dirs    []protocol.SnapshotEntry
	noAttrs error // why a mode or time could not be set
}

type rootPath struct {
	root Root
	path string
}

func (w *writer) made(e protocol.SnapshotEntry) {
	if !strings.Contains(e.Path, "/") {
		r, _ := rootIndex(e.Root)
		w.top = append(w.top, rootPath{r, e.Path})
	}
}

// put makes a directory or a symlink.
func (w *writer) put(e protocol.SnapshotEntry) error {
	r, _ := rootIndex(e.Root)
	switch e.Type {
	case protocol.SnapshotDir:
		if err := w.fsys.Mkdir(r, e.Path, 0o700|e.Mode&0o777); err != nil {
			return err
		}
		w.made(e)
		w.dirs = append(w.dirs, e)
		return nil
	case protocol.SnapshotSymlink:
		if err := w.symlink(r, e); err != nil {
			return err
		}
		w.made(e)
		return nil
	}
	return fmt.Errorf("entry type %q", e.Type)
}

// symlink makes a symlink. An FS opens and makes no links, so the writer
// makes it itself in the root (the kit may write in a session's root
// directory, group-owned by the kit), gives it its time there, and has
// the FS rename it into place (as the session, where the kit may not
// write).
func (w *writer) symlink(r Root, e protocol.SnapshotEntry) error {
	if f, err := w.fsys.Open(r, e.Path, unix.O_PATH|unix.O_NOFOLLOW, 0); err == nil {
		f.Close()
		return &os.PathError{Op: "symlink", Path: e.Path, Err: unix.EEXIST}
	}
	rf, err := w.fsys.Open(r, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer rf.Close()
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".glovebox-link-" + hex.EncodeToString(rnd[:])
	if err := unix.Symlinkat(e.Target, int(rf.Fd()), tmp); err != nil {
		return &os.PathError{Op: "symlink", Path: e.Path, Err: err}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(e.MTime.UnixNano()), unix.NsecToTimespec(e.MTime.UnixNano())}
	w.attr(unix.UtimesNanoAt(int(rf.Fd()), tmp, ts, unix.AT_SYMLINK_NOFOLLOW))
	if err := w.fsys.Rename(r, tmp, e.Path); err != nil {
		unix.Unlinkat(int(rf.Fd()), tmp, 0)
		return err
	}
	return nil
}

// file makes a regular file and fills it with fill.
func (w *writer) file(e protocol.SnapshotEntry, fill func(*os.File) error) error {
	r, _ := rootIndex(e.Root)
	f, err := w.fsys.Open(r, e.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, e.Mode&0o777)
	if err != nil {
		return err
	}
	w.made(e)
	err = fill(f)
	if err == nil {
		if a, ok := w.fsys.(AttrFS); ok {
			w.attr(a.Chmod(r, e.Path, e.Mode&0o777))
			w.attr(a.Chtimes(r, e.Path, e.MTime))
		} else {
			w.attr(f.Chmod(os.FileMode(e.Mode & 0o777)))
			w.attr(futimes(f, e.MTime))
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// finish sets the directories' modes and times, deepest first, and
// returns the warnings.
func (w *writer) finish() []string {
	for _, e := range slices.Backward(w.dirs) {
		r, _ := rootIndex(e.Root)
		if a, ok := w.fsys.(AttrFS); ok {
			w.attr(a.Chtimes(r, e.Path, e.MTime))
			w.attr(a.Chmod(r, e.Path, e.Mode&0o777))
			continue
		}
		d, err := w.fsys.Open(r, e.Path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			w.attr(err)
			continue
		}
		w.attr(futimes(d, e.MTime))
		w.attr(d.Chmod(os.FileMode(e.Mode & 0o777)))
		d.Close()
	}
	if w.noAttrs != nil {
		return []string{"some modes or modification times could not be set as they were: " + errText(w.noAttrs)}
	}
	return nil
}

func (w *writer) attr(err error) {
	if err != nil && w.noAttrs == nil {
		w.noAttrs = err
	}
}

// undo removes every top-level entry written.
func (w *writer) undo() {
	for _, t := range slices.Backward(w.top) {
		w.fsys.RemoveAll(t.root, t.path)
	}
	w.top = nil
}

// futimes sets f's access and modification times to t: futimens(3),
// utimensat with a NULL path, to the nanosecond.
func futimes(f *os.File, t time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 {
		return &os.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}
