package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestMain(m *testing.M) {
	if os.Getenv(killEnv) != "" {
		killChild()
		return
	}
	testkit.Main(m)
}

// roots makes the three roots of a session in a temp dir.
func newRoots(t testing.TB) DirFS {
	t.Helper()
	d := t.TempDir()
	var fsys DirFS
	for _, n := range rootNames {
		p := filepath.Join(d, n)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		fsys = append(fsys, p)
	}
	return fsys
}

var all = Roots{true, true, true}

// write makes a file with content and mode.
func write(t testing.TB, p string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// tree describes every entry beneath dir: type, mode, size, content or
// target, and modification time.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %s", info.Mode(), info.ModTime().UTC().Format(time.RFC3339Nano))
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += fmt.Sprintf(" %d %x", len(b), sum[:8])
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func trees(t testing.TB, fsys DirFS) []map[string]string {
	var out []map[string]string
	for _, d := range fsys {
		out = append(out, tree(t, d))
	}
	return out
}

// sample fills a session's roots with what a round trip must keep.
func sample(t testing.TB, fsys DirFS) {
	t.Helper()
	work, out := fsys[0], fsys[2]
	write(t, filepath.Join(work, "README"), "hello\n", 0o644)
	write(t, filepath.Join(work, "bin/run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	write(t, filepath.Join(work, "secret"), "chmod 600", 0o600)
	write(t, filepath.Join(work, "empty"), "", 0o640)
	write(t, filepath.Join(work, "dup-a"), "same bytes", 0o644)
	write(t, filepath.Join(work, "src/deep/er/dup-b"), "same bytes", 0o644)
	write(t, filepath.Join(out, "report.txt"), "done", 0o644)
	for _, d := range []string{"emptydir", "ro/inner"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(work, "ro/inner/f"), "in a read-only dir", 0o444)
	os.Chmod(filepath.Join(work, "ro/inner"), 0o555)
	for name, target := range map[string]string{
		"link-rel":    "README",
		"link-shadow": "/etc/shadow",
		"link-up":     "../../../../etc",
		"link-dir":    "src",
		"dangling":    "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Fixed times, so that the round trip shows they are kept.
	when := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	filepath.WalkDir(fsys[0], func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink == 0 && d.Type()&fs.ModeNamedPipe == 0 {
			os.Chtimes(p, when, when)
		}
		return nil
	})
}

// withoutFIFO drops the fifo, which a snapshot skips.
func withoutFIFO(ts []map[string]string) []map[string]string {
	delete(ts[0], "fifo")
	return ts
}

func TestRoundTrip(t *testing.T) {
	ctx := testkit.Context(t, "a snapshot round trip")
	src := newRoots(t)
	sample(t, src)
	st, err := OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id, m, stats, err := Take(ctx, src, all, st, Source{Session: "s1", Owner: "key", ClosureSHA256: "c1"}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	// "same bytes" is stored once; "" too.
	if stats.NewBlobs != 7 {
		t.Errorf("Take stored %d blobs, want 7 (the duplicate once)", stats.NewBlobs)
	}
	if len(m.Skipped) != 1 || m.Skipped[0].Path != "fifo" {
		t.Errorf("Skipped = %+v, want the fifo", m.Skipped)
	}
	for _, e := range m.Entries {
		if e.Type == protocol.SnapshotFile && strings.Contains(e.Path, "link") {
			t.Errorf("a symlink was stored as a file: %+v", e)
		}
	}

	got, err := Load(ctx, st, id, DefaultLimits)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("Load (-taken +loaded):\n%s", diff)
	}
	dst := newRoots(t)
	warnings, err := Restore(ctx, st, got, dst, all)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("Restore warnings: %v", warnings)
	}
	if diff := cmp.Diff(withoutFIFO(trees(t, src)), trees(t, dst)); diff != "" {
		t.Errorf("restored tree (-snapshotted +restored):\n%s", diff)
	}
}

func TestIncremental(t *testing.T) {
	ctx := testkit.Context(t, "two snapshots")
	src := newRoots(t)
	for i := range 50 {
		write(t, filepath.Join(src[0], fmt.Sprintf("f%02d", i)), strings.Repeat("x", i), 0o644)
	}
	st, _ := OpenLocal(t.TempDir())
	_, _, first, err := Take(ctx, src, all, st, Source{}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src[0], "f07"), "changed", 0o644)
	id2, _, second, err := Take(ctx, src, all, st, Source{}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if first.NewBlobs != 50 || second.NewBlobs != 1 || second.NewBytes != int64(len("changed")) {
		t.Errorf("new blobs: first %+v, second %+v; want 50, then 1 of 7 bytes", first, second)
	}
	ids, _ := st.Manifests(ctx)
	if len(ids) != 2 || !slices.Contains(ids, id2) {
		t.Errorf("Manifests = %v, want two", ids)
	}
	// Deleting the first and collecting keeps every blob the second names.
	for _, id := range ids {
		if id != id2 {
			st.DeleteManifest(ctx, id)
		}
	}
	removed, err := st.GC(ctx, 0)
	if err != nil || removed != 1 {
		t.Errorf("GC = %d, %v; want the one blob only the first named", removed, err)
	}
	m, _ := Load(ctx, st, id2, DefaultLimits)
	if err := Verify(ctx, st, m); err != nil {
		t.Errorf("Verify after GC: %v", err)
	}
}

// TestRestoreRefuses: a corrupt, partial, tampered or foreign snapshot is
// refused with a clear error before anything is written.
func TestRestoreRefuses(t *testing.T) {
	ctx := testkit.Context(t, "refused restores")
	tests := []struct {
		name    string
		spoil   func(t *testing.T, dir string, id string, m *protocol.SnapshotManifest) string // returns the id to restore
		lim     Limits
		wantErr string
		wantIs  error
	}{
		{
			name: "corrupt blob",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				p := blobFile(dir, fileEntry(m, "bin/run.sh").Blob)
				os.Chmod(p, 0o600)
				os.WriteFile(p, []byte("#!/bin/sh\nrm -rf ~\n"), 0o600)
				return id
			},
			wantErr: "is corrupt", wantIs: ErrCorrupt,
		},
		{
			name: "missing blob",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				os.Remove(blobFile(dir, fileEntry(m, "zz-last").Blob))
				return id
			},
			wantErr: "is missing (a partial snapshot)", wantIs: ErrCorrupt,
		},
		{
			name: "tampered manifest",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				p := filepath.Join(dir, "manifests", id+".json")
				b, _ := os.ReadFile(p)
				os.WriteFile(p, bytes.Replace(b, []byte(`"mode":420`), []byte(`"mode":2541`), 1), 0o600)
				return id
			},
			wantErr: "do not hash to its id", wantIs: ErrCorrupt,
		},
		{
			name: "truncated manifest",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				p := filepath.Join(dir, "manifests", id+".json")
				b, _ := os.ReadFile(p)
				os.WriteFile(p, b[:len(b)/2], 0o600)
				return id
			},
			wantErr: "do not hash to its id", wantIs: ErrCorrupt,
		},
		{
			name: "path escapes (re-hashed)",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				m.Entries = append(m.Entries, protocol.SnapshotEntry{Root: "work", Path: "../../etc/cron.d/x", Type: "symlink", Target: "/bin/sh"})
				return storeManifest(t, dir, m)
			},
			wantErr: `is not a clean relative path`, wantIs: ErrCorrupt,
		},
		{
			name: "entry before its directory (re-hashed)",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				m.Entries = append([]protocol.SnapshotEntry{{Root: "work", Path: "bin/x", Type: "dir"}}, m.Entries...)
				return storeManifest(t, dir, m)
			},
			wantErr: "comes before its directory", wantIs: ErrCorrupt,
		},
		{
			name: "sizes lie (re-hashed)",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				m.Size++
				return storeManifest(t, dir, m)
			},
			wantErr: "its files sum to", wantIs: ErrCorrupt,
		},
		{
			name:    "over quota",
			spoil:   func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string { return id },
			lim:     Limits{MaxSize: 10, MaxEntries: 1000, MaxManifest: 1 << 20},
			wantErr: "over 10 bytes", wantIs: ErrTooLarge,
		},
		{
			name: "unknown id",
			spoil: func(t *testing.T, dir, id string, m *protocol.SnapshotManifest) string {
				return strings.Repeat("ab", 32)
			},
			wantErr: "not found", wantIs: ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := newRoots(t)
			sample(t, src)
			write(t, filepath.Join(src[0], "zz-last"), "the last file", 0o644)
			dir := t.TempDir()
			st, _ := OpenLocal(dir)
			id, m, _, err := Take(ctx, src, all, st, Source{}, DefaultLimits, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			id = tt.spoil(t, dir, id, m)
			lim := tt.lim
			if lim.MaxSize == 0 {
				lim = DefaultLimits
			}
			dst := newRoots(t)
			write(t, filepath.Join(dst[0], "mine"), "already here", 0o644)
			before := trees(t, dst)
			lm, err := Load(ctx, st, id, lim)
			if err == nil {
				_, err = Restore(ctx, st, lm, dst, all)
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.wantIs) {
				t.Fatalf("restore = %v, want an error saying %q (%v)", err, tt.wantErr, tt.wantIs)
			}
			if diff := cmp.Diff(before, trees(t, dst)); diff != "" {
				t.Errorf("the target changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCheckImage(t *testing.T) {
	m := &protocol.SnapshotManifest{ClosureSHA256: "aaaa"}
	if w, err := CheckImage(m, "aaaa", false); w != "" || err != nil {
		t.Errorf("same image: %q, %v", w, err)
	}
	_, err := CheckImage(m, "bbbb", false)
	if !errors.Is(err, ErrImage) || !strings.Contains(err.Error(), "closure aaaa") || !strings.Contains(err.Error(), "closure bbbb") {
		t.Errorf("other image: %v, want ErrImage naming both closures", err)
	}
	w, err := CheckImage(m, "bbbb", true)
	if err != nil || !strings.Contains(w, "may not run") {
		t.Errorf("forced: %q, %v; want a warning of what may break", w, err)
	}
}

// A failure while writing removes what was written.
func TestRestoreUndoesAPartialWrite(t *testing.T) {
	ctx := testkit.Context(t, "a restore that fails")
	src := newRoots(t)
	sample(t, src)
	st, _ := OpenLocal(t.TempDir())
	id, _, _, err := Take(ctx, src, all, st, Source{}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := Load(ctx, st, id, DefaultLimits)
	dst := newRoots(t)
	// A name the snapshot also has: the restore meets it midway.
	write(t, filepath.Join(dst[0], "secret"), "mine", 0o600)
	before := trees(t, dst)
	if _, err := Restore(ctx, st, m, dst, all); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Restore = %v, want EEXIST", err)
	}
	if diff := cmp.Diff(before, trees(t, dst)); diff != "" {
		t.Errorf("left behind (-before +after):\n%s", diff)
	}
}

// Symlinks are stored as links, never followed: out of the workspace, or
// through a linked directory.
func TestSymlinksNotFollowed(t *testing.T) {
	ctx := testkit.Context(t, "a snapshot with escaping links")
	src := newRoots(t)
	outside := t.TempDir()
	write(t, filepath.Join(outside, "other-session-secret"), "not yours", 0o600)
	os.Symlink(outside, filepath.Join(src[0], "other"))
	os.Symlink("/etc/shadow", filepath.Join(src[0], "shadow"))
	st, _ := OpenLocal(t.TempDir())
	_, m, stats, err := Take(ctx, src, all, st, Source{}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if stats.NewBlobs != 0 || len(m.Entries) != 2 {
		t.Errorf("stored %d blobs, entries %+v; want the two links only", stats.NewBlobs, m.Entries)
	}
	if _, err := src.Open(0, "other/other-session-secret", os.O_RDONLY, 0); !errors.Is(err, ErrOutside) {
		t.Errorf("DirFS.Open through a link out = %v, want ErrOutside", err)
	}
}

func TestCopy(t *testing.T) {
	ctx := testkit.Context(t, "a fork's copy")
	src := newRoots(t)
	sample(t, src)
	dst := newRoots(t)
	method, err := Copy(ctx, src, dst, all, DefaultLimits)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	t.Logf("method %s", method)
	if diff := cmp.Diff(withoutFIFO(trees(t, src)), trees(t, dst)); diff != "" {
		t.Errorf("copied tree (-source +copy):\n%s", diff)
	}
	// The copy is its own: changing it leaves the source as it was.
	os.WriteFile(filepath.Join(dst[0], "README"), []byte("forked"), 0o644)
	if b, _ := os.ReadFile(filepath.Join(src[0], "README")); string(b) != "hello\n" {
		t.Errorf("source README = %q after the copy changed", b)
	}
}

func TestTakeLimits(t *testing.T) {
	ctx := testkit.Context(t, "snapshots over their limits")
	src := newRoots(t)
	sample(t, src)
	st, _ := OpenLocal(t.TempDir())
	for _, lim := range []Limits{
		{MaxSize: 5, MaxEntries: 100, MaxManifest: 1 << 20},
		{MaxSize: 1 << 20, MaxEntries: 3, MaxManifest: 1 << 20},
		{MaxSize: 1 << 20, MaxEntries: 100, MaxManifest: 100},
	} {
		if _, _, _, err := Take(ctx, src, all, st, Source{}, lim, time.Now()); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Take with %+v = %v, want ErrTooLarge", lim, err)
		}
	}
	if ids, _ := st.Manifests(ctx); len(ids) != 0 {
		t.Errorf("a refused snapshot is listed: %v", ids)
	}
}

func blobFile(dir, sum string) string { return filepath.Join(dir, "blobs", sum[:2], sum) }

func fileEntry(m *protocol.SnapshotManifest, p string) protocol.SnapshotEntry {
	for _, e := range m.Entries {
		if e.Path == p {
			return e
		}
	}
	panic("no entry " + p)
}

// storeManifest stores m as a well-hashed manifest, as a forger with
// write access to the store would, and returns its id.
func storeManifest(t *testing.T, dir string, m *protocol.SnapshotManifest) string {
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	id := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, "manifests", id+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

func FuzzDecode(f *testing.F) {
	src := DirFS{f.TempDir(), "", ""}
	write(f, filepath.Join(src[0], "a/b"), "x", 0o644)
	os.Symlink("a/b", filepath.Join(src[0], "l"))
	st, _ := OpenLocal(f.TempDir())
	_, m, _, err := Take(context.Background(), src, Roots{true}, st, Source{Session: "s"}, DefaultLimits, time.Unix(0, 0))
	if err != nil {
		f.Fatal(err)
	}
	b, _ := json.Marshal(m)
	f.Add(b)
	f.Add([]byte(`{"v":1,"entries":[{"root":"work","path":"../x","type":"dir"}]}`))
	f.Add([]byte(`{"v":1,"size":-1,"entries":[{"root":"work","path":"f","type":"file","blob":"` + strings.Repeat("0", 64) + `","size":-1}]}`))
	lim := Limits{MaxSize: 1 << 20, MaxEntries: 1000, MaxManifest: 1 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, lim)
		if err != nil {
			return
		}
		// What decodes is safe to restore: clean paths, parents first.
		for _, e := range m.Entries {
			if !cleanRel(e.Path) || strings.Contains(e.Path, "..") && slices.Contains(strings.Split(e.Path, "/"), "..") {
				t.Fatalf("Decode accepted path %q", e.Path)
			}
		}
		if m.Size > lim.MaxSize || len(m.Entries) > lim.MaxEntries {
			t.Fatalf("Decode accepted %d bytes, %d entries", m.Size, len(m.Entries))
		}
	})
}

// noReads is an FS whose regular files cannot be read: their opens give
// O_PATH descriptors, which fstat but fail every read.
type noReads struct{ DirFS }

func (n noReads) Open(root Root, rel string, flags int, perm uint32) (*os.File, error) {
	pf, err := n.DirFS.Open(root, rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(pf.Fd()), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && flags&unix.O_PATH == 0 {
		return pf, nil
	}
	pf.Close()
	return n.DirFS.Open(root, rel, flags, perm)
}

// TestHashCache: with the session's cache, a second snapshot of
// unchanged files reads none of them; a changed file is read again.
func TestHashCache(t *testing.T) {
	ctx := testkit.Context(t, "cached snapshots")
	src := newRoots(t)
	sample(t, src)
	st, _ := OpenLocal(t.TempDir())
	cache := NewHashCache()
	id1, _, _, err := TakeCached(ctx, src, all, st, Source{}, DefaultLimits, time.Now(), cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Take(ctx, noReads{src}, all, st, Source{}, DefaultLimits, time.Now()); err == nil {
		t.Fatal("a snapshot without the cache read no file: noReads lets reads through")
	}
	_, m2, _, err := TakeCached(ctx, noReads{src}, all, st, Source{}, DefaultLimits, time.Now(), cache)
	if err != nil {
		t.Fatalf("a snapshot of unchanged files read one: %v", err)
	}
	m1, _ := Load(ctx, st, id1, DefaultLimits)
	if diff := cmp.Diff(m1.Entries, m2.Entries); diff != "" {
		t.Errorf("cached snapshot entries (-first +cached):\n%s", diff)
	}

	write(t, filepath.Join(src[0], "README"), "HELLO\n", 0o644) // same size
	id3, _, stats, err := TakeCached(ctx, src, all, st, Source{}, DefaultLimits, time.Now(), cache)
	if err != nil || stats.NewBlobs != 1 {
		t.Fatalf("snapshot after a change: %v, %d new blobs, want 1", err, stats.NewBlobs)
	}
	m3, _ := Load(ctx, st, id3, DefaultLimits)
	dst := newRoots(t)
	if _, err := Restore(ctx, st, m3, dst, all); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst[0], "README")); string(b) != "HELLO\n" {
		t.Errorf("restored README = %q, want the changed bytes", b)
	}
}
