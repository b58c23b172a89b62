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
	"path"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Limits bound a snapshot.
type Limits struct {
	// MaxSize bounds the sum of a snapshot's file sizes.
	MaxSize int64
	// MaxEntries bounds its entries.
	MaxEntries int
	// MaxManifest bounds its manifest's bytes.
	MaxManifest int64
}

// DefaultLimits: 10 GiB of files, a million entries, a 512 MiB manifest.
var DefaultLimits = Limits{MaxSize: 10 << 30, MaxEntries: 1_000_000, MaxManifest: 512 << 20}

// Source is what a snapshot records of where it came from.
type Source struct {
	Box, BoxVersion, ClosureSHA256, ManifestSHA256 string
	Session, Owner                                 string
	Agent                                          string // the agent's conversation id (SnapshotManifest.Agent)
}

// Stats say what taking a snapshot stored anew.
type Stats struct {
	NewBlobs int
	NewBytes int64
}

// Take snapshots the roots of fsys into st: each regular file's bytes as
// a blob (unless st holds it already), then the manifest. It returns the
// snapshot's id and manifest. Special files, and files the FS may not
// read, are left out and listed in the manifest's Skipped.
//
// Take reads the directories as they are: files a running agent changes
// meanwhile are stored as one of their states, or fail the snapshot when
// a file changes while it is read.
func Take(ctx context.Context, fsys FS, roots Roots, st Store, src Source, lim Limits, now time.Time) (string, *protocol.SnapshotManifest, Stats, error) {
	return TakeCached(ctx, fsys, roots, st, src, lim, now, nil)
}

// TakeCached is Take with a cache of the hashes of the files a previous
// snapshot of the same session read: a file whose inode, size,
// modification and change times are those it had then, and whose blob
// the store holds, is not read again. cache may be nil. Keep one cache
// per session: a change time, which only the kernel sets, is as coarse
// as the kernel's clock tick, so across sessions a deleted file's inode
// reused within a tick could pass for it.
func TakeCached(ctx context.Context, fsys FS, roots Roots, st Store, src Source, lim Limits, now time.Time, cache *HashCache) (string, *protocol.SnapshotManifest, Stats, error) {
	m := &protocol.SnapshotManifest{
		V: protocol.SnapshotManifestVersion, Box: src.Box, BoxVersion: src.BoxVersion,
		ClosureSHA256: src.ClosureSHA256, ManifestSHA256: src.ManifestSHA256,
		Session: src.Session, Owner: src.Owner, Agent: src.Agent, Created: now.UTC().Truncate(time.Millisecond),
		Entries: []protocol.SnapshotEntry{},
	}
	var stats Stats
	stored := map[string]bool{}
	visit := func(e protocol.SnapshotEntry, f *os.File) error {
		if len(m.Entries) >= lim.MaxEntries {
			return fmt.Errorf("more than %d entries: %w", lim.MaxEntries, ErrTooLarge)
		}
		if f != nil {
			var err error
			if e, err = storeFile(ctx, st, f, e, stored, &stats, cache); err != nil {
				return err
			}
			if m.Size += e.Size; m.Size > lim.MaxSize {
				return fmt.Errorf("more than %d bytes of files: %w", lim.MaxSize, ErrTooLarge)
			}
		}
		m.Entries = append(m.Entries, e)
		return nil
	}
	skip := func(s protocol.SnapshotSkip) { m.Skipped = append(m.Skipped, s) }
	for i, ok := range roots {
		if ok {
			if err := walk(ctx, fsys, Root(i), visit, skip); err != nil {
				return "", nil, stats, fmt.Errorf("snapshot %s: %w", rootNames[i], err)
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", nil, stats, err
	}
	if int64(len(b)) > lim.MaxManifest {
		return "", nil, stats, fmt.Errorf("snapshot: its manifest is %d bytes, over %d: %w", len(b), lim.MaxManifest, ErrTooLarge)
	}
	sum := sha256.Sum256(b)
	id := hex.EncodeToString(sum[:])
	if err := st.PutManifest(ctx, id, b); err != nil {
		return "", nil, stats, err
	}
	return id, m, stats, nil
}

// HashCache remembers files' hashes by what fstat says of them (see
// TakeCached). Safe for concurrent use; the zero value is not: use
// NewHashCache. A nil cache remembers nothing.
type HashCache struct {
	mu sync.Mutex
	m  map[fileKey]string
}

// maxCached bounds a cache: past it, it starts again empty.
const maxCached = 1 << 20

type fileKey struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

func statKey(st *unix.Stat_t) fileKey {
	return fileKey{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// NewHashCache returns an empty cache.
func NewHashCache() *HashCache { return &HashCache{m: map[fileKey]string{}} }

func (c *HashCache) get(k fileKey) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sum, ok := c.m[k]
	return sum, ok
}

func (c *HashCache) put(k fileKey, sum string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		c.m = map[fileKey]string{}
	}
	c.m[k] = sum
}

// changeTries is how many times a file that changes while it is read is
// read again before the snapshot fails.
const changeTries = 3

// errChanged: a file changed while it was read.
var errChanged = errors.New("the file changed while it was read")

// storeFile stores f's bytes as a blob unless st holds them (or this
// snapshot stored them already), and returns e with its size, time and
// blob. A file that changes while it is read is read again.
func storeFile(ctx context.Context, st Store, f *os.File, e protocol.SnapshotEntry, stored map[string]bool, stats *Stats, cache *HashCache) (protocol.SnapshotEntry, error) {
	var err error
	for range changeTries {
		var fst unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &fst); err != nil {
			return e, &fs.PathError{Op: "stat", Path: e.Path, Err: err}
		}
		e.Size, e.Mode = fst.Size, fst.Mode&0o7777
		e.MTime = time.Unix(fst.Mtim.Unix()).UTC()
		key := statKey(&fst)
		if sum, ok := cache.get(key); ok {
			if stored[sum] {
				e.Blob = sum
				return e, nil
			}
			if has, herr := st.HasBlob(ctx, sum); herr == nil && has {
				e.Blob, stored[sum] = sum, true
				return e, nil
			}
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return e, err
		}
		e.Blob, err = hashFile(ctx, f, e.Size)
		if errors.Is(err, errChanged) {
			continue
		}
		if err == nil {
			var after unix.Stat_t
			if unix.Fstat(int(f.Fd()), &after) == nil && statKey(&after) == key {
				cache.put(key, e.Blob)
			}
		}
		if err != nil || stored[e.Blob] {
			break
		}
		has, herr := st.HasBlob(ctx, e.Blob)
		if err = herr; err != nil || has {
			stored[e.Blob] = has
			break
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return e, err
		}
		err = st.PutBlob(ctx, e.Blob, e.Size, f)
		if errors.Is(err, errChanged) {
			continue
		}
		if err == nil {
			stored[e.Blob] = true
			stats.NewBlobs++
			stats.NewBytes += e.Size
		}
		break
	}
	if errors.Is(err, errChanged) {
		err = fmt.Errorf("%w %d times: snapshot the session while nothing writes it", err, changeTries)
	}
	if err != nil {
		return e, fmt.Errorf("%s/%s: %w", e.Root, e.Path, err)
	}
	return e, nil
}

// hashFile hashes exactly size bytes of f.
func hashFile(ctx context.Context, f *os.File, size int64) (string, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(ctxReader{ctx, f}, size+1))
	if err != nil {
		return "", err
	}
	if n != size {
		return "", fmt.Errorf("%d bytes, want %d: %w", n, size, errChanged)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// walk visits every entry beneath root, depth first, names sorted: a
// directory before what it holds. A regular file is visited with its
// open descriptor (read only, opened through fsys), others with nil.
func walk(ctx context.Context, fsys FS, root Root, visit func(protocol.SnapshotEntry, *os.File) error, skip func(protocol.SnapshotSkip)) error {
	name := rootNames[root]
	var dir func(d *os.File, rel string, depth int) error
	dir = func(d *os.File, rel string, depth int) error {
		if depth > 256 {
			return fmt.Errorf("%s: directories nested deeper than 256", rel)
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return &fs.PathError{Op: "readdir", Path: rel, Err: err}
		}
		slices.Sort(names)
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := n
			if rel != "." {
				p = rel + "/" + n
			}
			e, sub, err := entry(fsys, root, p, visit)
			switch {
			case errors.Is(err, errSkip):
				skip(protocol.SnapshotSkip{Root: name, Path: p, Reason: e.Target})
				continue
			case err != nil:
				return err
			}
			if sub != nil {
				if err := dir(sub, p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	d, err := fsys.Open(root, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	return dir(d, ".", 0)
}

// errSkip marks an entry left out; entry puts the reason in Target.
var errSkip = errors.New("skip")

// entry describes and visits root/p, and returns a directory open to be
// read. A file or directory takes one open through fsys; a symlink, a
// special file or what the session may not read, a second (O_PATH) to
// say what it is.
func entry(fsys FS, root Root, p string, visit func(protocol.SnapshotEntry, *os.File) error) (e protocol.SnapshotEntry, sub *os.File, err error) {
	e = protocol.SnapshotEntry{Root: rootNames[root], Path: p}
	f, err := fsys.Open(root, p, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err == nil {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return e, nil, &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		e.Mode = st.Mode & 0o7777
		e.MTime = time.Unix(st.Mtim.Unix()).UTC()
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = protocol.SnapshotDir
			if err := visit(e, nil); err != nil {
				f.Close()
				return e, nil, err
			}
			return e, f, nil
		case unix.S_IFREG:
			defer f.Close()
			e.Type = protocol.SnapshotFile
			e.Size = st.Size
			return e, nil, visit(e, f)
		}
		f.Close()
		e.Target = "replaced while the snapshot was taken"
		return e, nil, errSkip
	}
	if errors.Is(err, fs.ErrNotExist) {
		e.Target = "removed while the snapshot was taken"
		return e, nil, errSkip
	}
	if !errors.Is(err, unix.ELOOP) && !errors.Is(err, ErrSpecial) && !errors.Is(err, fs.ErrPermission) {
		return e, nil, err
	}
	pf, err := fsys.Open(root, p, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		e.Target = "removed while the snapshot was taken"
		return e, nil, errSkip
	}
	if err != nil {
		return e, nil, err
	}
	defer pf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(pf.Fd()), &st); err != nil {
		return e, nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	e.Mode = st.Mode & 0o7777
	e.MTime = time.Unix(st.Mtim.Unix()).UTC()
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		e.Type = protocol.SnapshotSymlink
		e.Mode = 0o777
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(int(pf.Fd()), "", buf)
		if err != nil {
			return e, nil, &fs.PathError{Op: "readlink", Path: p, Err: err}
		}
		e.Target = string(buf[:n])
		return e, nil, visit(e, nil)
	case unix.S_IFREG, unix.S_IFDIR:
		e.Target = "the session may not read it (mode " + fmt.Sprintf("%04o", e.Mode) + ")"
		return e, nil, errSkip
	}
	e.Target = "special file (device, fifo or socket)"
	return e, nil, errSkip
}

// errText is an error's cause without its path.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// cleanRel reports whether p is a clean relative slash path beneath its
// root: no "", ".", ".." element, no NUL, at most 4096 bytes, elements of
// at most 255.
func cleanRel(p string) bool {
	if p == "" || len(p) > 4096 || path.Clean(p) != p || p[0] == '/' || p == "." {
		return false
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			el := p[start:i]
			if el == "" || el == "." || el == ".." || len(el) > 255 {
				return false
			}
			start = i + 1
			continue
		}
		if p[i] == 0 {
			return false
		}
	}
	return true
}
