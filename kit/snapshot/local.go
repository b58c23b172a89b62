package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Local is a Store in a directory:
//
//	blobs/ab/abcdef…     one file per blob, named by its sha256
//	manifests/ID.json    one per snapshot
//	tmp/                 what is being written (removed at open)
//
// A blob is written to tmp/ unsynced and stays there until the next
// manifest is put: PutManifest syncs the file system once, renames the
// pending blobs into blobs/, syncs again, then writes the manifest. So a
// blob is under its name only once its bytes are on disk (a kill or a
// power cut leaves it in tmp/, which OpenLocal empties), and a snapshot
// of 10,000 files costs two syncs, not 10,000.
type Local struct {
	dir string

	mu      sync.Mutex
	pending map[string]string // sum: its file in tmp/
}

var _ Store = (*Local)(nil)

// OpenLocal opens (making it) the store in dir and removes what a killed
// writer left in its tmp directory.
func OpenLocal(dir string) (*Local, error) {
	for _, d := range []string{"blobs", "manifests", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("open snapshot store %s: %w", dir, err)
		}
	}
	l := &Local{dir: dir, pending: map[string]string{}}
	l.clearTmp(0)
	return l, nil
}

// clearTmp removes temporary files older than age, pending blobs among
// them (a snapshot that failed left them; one in progress has younger
// ones).
func (l *Local) clearTmp(age time.Duration) {
	ents, _ := os.ReadDir(filepath.Join(l.dir, "tmp"))
	removed := map[string]bool{}
	for _, e := range ents {
		p := filepath.Join(l.dir, "tmp", e.Name())
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) >= age && os.Remove(p) == nil {
			removed[p] = true
		}
	}
	l.mu.Lock()
	for sum, p := range l.pending {
		if removed[p] {
			delete(l.pending, sum)
		}
	}
	l.mu.Unlock()
}

func validSum(s string) bool { return protocol.ValidSnapshotID(s) }

func (l *Local) blobPath(sum string) string {
	return filepath.Join(l.dir, "blobs", sum[:2], sum)
}

// HasBlob implements Store.
func (l *Local) HasBlob(_ context.Context, sum string) (bool, error) {
	if !validSum(sum) {
		return false, fmt.Errorf("blob %q: not a sha256", sum)
	}
	l.mu.Lock()
	_, pending := l.pending[sum]
	l.mu.Unlock()
	if pending {
		return true, nil
	}
	_, err := os.Stat(l.blobPath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// PutBlob implements Store: the bytes go to a temporary file, hashed on
// the way, which the next PutManifest moves into place when their hash is
// sum.
func (l *Local) PutBlob(ctx context.Context, sum string, size int64, r io.Reader) error {
	if !validSum(sum) {
		return fmt.Errorf("blob %q: not a sha256", sum)
	}
	f, err := os.CreateTemp(filepath.Join(l.dir, "tmp"), "blob-")
	if err != nil {
		return fmt.Errorf("store blob %s: %w", sum, err)
	}
	tmp := f.Name()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(ctxReader{ctx, r}, size+1))
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes, want %d: %w", n, size, errChanged)
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != sum {
		err = fmt.Errorf("the bytes do not hash to the blob's name: %w", errChanged)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store blob %s: %w", sum, err)
	}
	l.mu.Lock()
	if old, ok := l.pending[sum]; ok {
		os.Remove(old)
	}
	l.pending[sum] = tmp
	l.mu.Unlock()
	return nil
}

// commit syncs the pending blobs and moves them into place.
func (l *Local) commit() error {
	l.mu.Lock()
	pending := l.pending
	l.pending = map[string]string{}
	l.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	if err := syncFS(l.dir); err != nil {
		return err
	}
	for sum, tmp := range pending {
		if err := os.MkdirAll(filepath.Dir(l.blobPath(sum)), 0o700); err != nil {
			return err
		}
		if err := os.Rename(tmp, l.blobPath(sum)); err != nil {
			return err // a pending blob removed from tmp/ (GC of an old one)
		}
	}
	return syncFS(l.dir)
}

// syncFS flushes the file system dir is on (syncfs(2)).
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: err}
	}
	return nil
}

// OpenBlob implements Store.
func (l *Local) OpenBlob(_ context.Context, sum string) (io.ReadCloser, error) {
	if !validSum(sum) {
		return nil, fmt.Errorf("blob %q: not a sha256: %w", sum, ErrCorrupt)
	}
	f, err := os.Open(l.blobPath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	return f, err
}

func (l *Local) manifestPath(id string) string {
	return filepath.Join(l.dir, "manifests", id+".json")
}

// PutManifest implements Store: a temporary file, synced, renamed into
// place, the directory synced.
func (l *Local) PutManifest(_ context.Context, id string, b []byte) error {
	if !validSum(id) {
		return fmt.Errorf("snapshot id %q: not a sha256", id)
	}
	if err := l.commit(); err != nil {
		return fmt.Errorf("store snapshot %s: its blobs: %w", id, err)
	}
	f, err := os.CreateTemp(filepath.Join(l.dir, "tmp"), "manifest-")
	if err != nil {
		return fmt.Errorf("store snapshot %s: %w", id, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.manifestPath(id))
	}
	if err == nil {
		err = syncDir(filepath.Join(l.dir, "manifests"))
	}
	if err != nil {
		return fmt.Errorf("store snapshot %s: %w", id, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Manifest implements Store.
func (l *Local) Manifest(_ context.Context, id string, max int64) ([]byte, error) {
	if !validSum(id) {
		return nil, fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	f, err := os.Open(l.manifestPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readMax(f, max, id)
}

func readMax(r io.Reader, max int64, id string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", id, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("snapshot %s: its manifest is over %d bytes: %w", id, max, ErrTooLarge)
	}
	return b, nil
}

// Manifests implements Store.
func (l *Local) Manifests(context.Context) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(l.dir, "manifests"))
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && validSum(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// DeleteManifest implements Store.
func (l *Local) DeleteManifest(_ context.Context, id string) error {
	if !validSum(id) {
		return fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	err := os.Remove(l.manifestPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	return err
}

// GC removes the blobs no manifest names, and the temporary files older
// than age (those of a snapshot being taken are younger: run GC while
// none is, or with an age longer than a snapshot takes). It returns how
// many blobs it removed.
func (l *Local) GC(ctx context.Context, age time.Duration) (int, error) {
	keep, err := referenced(ctx, l)
	if err != nil {
		return 0, err
	}
	l.clearTmp(age)
	removed := 0
	err = filepath.WalkDir(filepath.Join(l.dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || keep[d.Name()] {
			return nil
		}
		if os.Remove(p) == nil {
			removed++
		}
		return nil
	})
	return removed, err
}

// referenced collects the blobs the store's manifests name, whatever
// limits the manifests were taken under.
func referenced(ctx context.Context, st Store) (map[string]bool, error) {
	ids, err := st.Manifests(ctx)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, id := range ids {
		b, err := st.Manifest(ctx, id, DefaultLimits.MaxManifest)
		if err != nil {
			return nil, fmt.Errorf("read snapshot %s: %w", id, err)
		}
		var m struct {
			Entries []struct {
				Blob string `json:"blob"`
			} `json:"entries"`
		}
		if json.Unmarshal(b, &m) != nil {
			continue // not a manifest: it keeps nothing
		}
		for _, e := range m.Entries {
			if e.Blob != "" {
				keep[e.Blob] = true
			}
		}
	}
	return keep, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
