package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Defaults of the local file store.
const (
	DefaultTTL           = time.Hour
	DefaultSweepInterval = time.Minute
	// tempGrace is how old a leftover temp file must be before a sweep
	// removes it: younger ones may still be being written by another
	// process sharing the directory.
	tempGrace  = time.Hour
	tempPrefix = ".tmp-"
	// copyChunk is how much Put copies between context checks.
	copyChunk = 8 << 20
)

// LocalOptions configure a Local store. Every field has a default.
type LocalOptions struct {
	// PublicURL is the base URL clients reach the kit at; a stored file's
	// ref has url PublicURL + "/files/" + id. A trailing slash is dropped.
	// Empty gives relative URLs ("/files/<id>"), which only clients that
	// know the box's address can use.
	PublicURL string
	// DefaultTTL is how long a file lives when its rule gives no "ttl"
	// option. Default DefaultTTL (one hour, as v1).
	DefaultTTL time.Duration
	// SweepInterval is how often the loop Start runs sweeps. Default
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives sweep results and serving errors. Default: discard.
	Logger *slog.Logger
	// Inline serves files with Content-Disposition inline and no
	// Content-Security-Policy, as v1 did. By default ServeFile serves every
	// file as a download (attachment) under a CSP that forbids everything
	// and sandboxes it: the files are written by agents, and a browser
	// link to one carries a token.
	Inline bool
}

// Local is the localServer adapter: files parked on the box under a
// directory, indexed in SQLite, served by ServeFile and removed once their
// TTL has passed. It is safe for concurrent use.
//
// Each file is a regular file named by its id (a random UUID v4) with mode
// 0600; the SQLite table files(id, request_id, name, mime, size,
// created_at, ttl_at, session_id) indexes them, with times in Unix seconds.
// The schema is v1's plus session_id, so a v1 database opens as is.
//
// The directory belongs to the store: a sweep removes any file named like
// an id that has no row. One directory serves one process at a time.
type Local struct {
	dir       string
	db        *sql.DB
	lookupSQL *sql.Stmt // the /files hot path, prepared once
	publicURL string
	inline    bool
	ttl       time.Duration
	interval  time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu        sync.Mutex
	inflight  map[string]struct{}     // ids whose Put has not inserted its row yet
	consuming map[string]*consumeLock // ids with a ?consume=1 request in progress
	started   bool
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var (
	_ Adapter = (*Local)(nil)
	_ Sweeper = (*Local)(nil)
)

// OpenLocal opens (creating when needed) a store with files under dir and
// the index in the SQLite database at dbPath (WAL mode). v1 used
// /var/glovebox/files and /var/glovebox/files.db. Call Start to sweep at
// boot and periodically, and Close when done.
func OpenLocal(ctx context.Context, dir, dbPath string, opts LocalOptions) (*Local, error) {
	if dir == "" || dbPath == "" {
		return nil, errors.New("open file store: needs a directory and a database path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open file store %s: %w", dir, err)
	}
	absDB, err := filepath.Abs(dbPath)
	if err != nil {
		return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
	}
	if err := os.MkdirAll(filepath.Dir(absDB), 0o700); err != nil {
		return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
	}
	// The index names every parked file: keep it as private as the files.
	// SQLite gives the -wal and -shm files it creates the database's mode.
	if err := privateFile(absDB); err != nil {
		return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if err := os.Chmod(absDB+side, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
		}
	}
	dsn := "file:" + (&url.URL{Path: absDB}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
	}
	db.SetMaxOpenConns(4)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
	}

	lookupSQL, err := db.PrepareContext(ctx, `SELECT name, mime, size, ttl_at FROM files WHERE id = ?`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open file store database %s: %w", dbPath, err)
	}
	l := &Local{
		dir:       dir,
		db:        db,
		lookupSQL: lookupSQL,
		publicURL: strings.TrimRight(opts.PublicURL, "/"),
		inline:    opts.Inline,
		ttl:       opts.DefaultTTL,
		interval:  opts.SweepInterval,
		now:       opts.Now,
		log:       opts.Logger,
		inflight:  map[string]struct{}{},
		consuming: map[string]*consumeLock{},
	}
	if l.ttl <= 0 {
		l.ttl = DefaultTTL
	}
	if l.interval <= 0 {
		l.interval = DefaultSweepInterval
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

// Dir returns the directory holding the files.
func (l *Local) Dir() string { return l.dir }

// TTL returns how long a file stored with meta.Options lives: the "ttl"
// option (a duration such as "24h") when set, else the store's default.
// v1 ignored the option; it is honoured here.
func (l *Local) TTL(options map[string]any) (time.Duration, error) {
	v, ok := options["ttl"]
	if !ok || v == nil {
		return l.ttl, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return 0, fmt.Errorf("option ttl must be a duration string such as \"1h\", not %v", v)
	}
	d, err := protocol.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("option ttl: %w", err)
	}
	return d, nil
}

// Put streams exactly meta.Size bytes from r into a new file and indexes
// it with ttl_at = now + TTL(meta.Options). The bytes go to a temporary
// file in the store's directory, are synced, and the file is renamed to its
// id before the row is inserted, so a row always names a complete file.
// The returned ref is of kind server: {name, mime, size, id, url}.
func (l *Local) Put(ctx context.Context, meta Meta, r io.Reader) (protocol.FileRef, error) {
	if meta.Size < 0 {
		return protocol.FileRef{}, fmt.Errorf("park %s: negative size %d", meta.Name, meta.Size)
	}
	ttl, err := l.TTL(meta.Options)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("park %s: %w", meta.Name, err)
	}
	mime := meta.Mime
	if mime == "" {
		mime = protocol.GuessMime(meta.Name)
	}
	id := newUUID()
	l.mu.Lock()
	l.inflight[id] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.inflight, id)
		l.mu.Unlock()
	}()

	final := filepath.Join(l.dir, id)
	if err := l.writeFile(ctx, final, meta.Size, r); err != nil {
		return protocol.FileRef{}, fmt.Errorf("park %s: %w", meta.Name, err)
	}
	now := l.now()
	_, err = l.db.ExecContext(ctx,
		`INSERT INTO files (id, request_id, name, mime, size, created_at, ttl_at, session_id, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, meta.PromptID, meta.Name, mime, meta.Size, now.Unix(), now.Add(ttl).Unix(), meta.SessionID, meta.Owner)
	if err != nil {
		os.Remove(final)
		return protocol.FileRef{}, fmt.Errorf("park %s: index: %w", meta.Name, err)
	}
	return protocol.FileRef{
		Kind: protocol.KindServer,
		Name: meta.Name,
		Mime: mime,
		Size: meta.Size,
		ID:   id,
		URL:  l.publicURL + "/files/" + id,
	}, nil
}

// writeFile copies exactly size bytes from r to a temp file, syncs it and
// renames it to final.
func (l *Local) writeFile(ctx context.Context, final string, size int64, r io.Reader) (err error) {
	tmp := filepath.Join(l.dir, tempPrefix+filepath.Base(final))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Copy in chunks so a cancelled ctx stops a large copy; io.CopyN keeps
	// the zero-copy path (copy_file_range, splice) when r is a file, or a
	// file under an io.LimitReader, which src unwraps.
	src, lr := r, (*io.LimitedReader)(nil)
	if lim, ok := r.(*io.LimitedReader); ok && lim.N >= size {
		if _, isFile := lim.R.(*os.File); isFile {
			src, lr = lim.R, lim
		}
	}
	for left := size; left > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := io.CopyN(f, src, min(left, copyChunk))
		if lr != nil {
			lr.N -= n
		}
		left -= n
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("short content: got %d of %d bytes", size-left, size)
		}
		if err != nil {
			return fmt.Errorf("copy content to %s: %w", tmp, err)
		}
	}
	if err := checkEOF(r, size); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	syncDir(l.dir)
	return nil
}

// syncDir makes a rename durable; failure only costs durability on a crash.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// expired reports v1's rule: a file is gone once ttl_at < now, in seconds.
func (l *Local) expired(r row) bool { return r.TTLAt < l.now().Unix() }

// openFile opens the file of an indexed id. A row whose file is missing is
// removed and reported as ErrNotFound.
func (l *Local) openFile(ctx context.Context, id string, r row) (*os.File, error) {
	f, err := os.Open(filepath.Join(l.dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("file store row without a file; removing it", "id", id)
		if _, err := l.db.ExecContext(ctx, `DELETE FROM files WHERE id = ?`, id); err != nil {
			l.log.Error("remove dangling file row", "id", id, "err", err)
		}
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open file %s: %w", id, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat file %s: %w", id, err)
	}
	if st.Size() != r.Size {
		f.Close()
		return nil, fmt.Errorf("file %s has %d bytes, its index says %d", id, st.Size(), r.Size)
	}
	return f, nil
}

// Open opens a server ref stored here. An unknown id, or one whose file is
// missing, is ErrNotFound; a file past its TTL is ErrExpired; a file over
// max bytes (max > 0) is ErrTooLarge. The reader is the file itself.
func (l *Local) Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error) {
	if ref.Kind != protocol.KindServer {
		return nil, fmt.Errorf("localServer adapter cannot read a %s ref (file %q)", ref.Kind, ref.Name)
	}
	if !ValidID(ref.ID) {
		return nil, fmt.Errorf("server file %q: id %q: %w", ref.Name, ref.ID, ErrNotFound)
	}
	r, err := l.lookup(ctx, ref.ID)
	if err != nil {
		return nil, fmt.Errorf("server file %q: %w", ref.Name, err)
	}
	if l.expired(r) {
		return nil, fmt.Errorf("server file %q: %w", ref.Name, ErrExpired)
	}
	if max > 0 && r.Size > max {
		return nil, fmt.Errorf("server file %q: %d bytes is over %d: %w", ref.Name, r.Size, max, ErrTooLarge)
	}
	f, err := l.openFile(ctx, ref.ID, r)
	if err != nil {
		return nil, fmt.Errorf("server file %q: %w", ref.Name, err)
	}
	return f, nil
}

// Owner returns the owner recorded for a stored file ("" for files stored
// without one, or by a v1 kit), or ErrNotFound.
func (l *Local) Owner(ctx context.Context, id string) (string, error) {
	if !ValidID(id) {
		return "", ErrNotFound
	}
	var owner string
	err := l.db.QueryRowContext(ctx, `SELECT owner FROM files WHERE id = ?`, id).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("look up file %s: %w", id, err)
	}
	return owner, nil
}

// Close stops the sweep loop, waits for it to return, and closes the
// database. Reads, writes and ServeFile after Close fail (ServeFile answers
// 500), so stop serving /files first. Close is idempotent.
func (l *Local) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		stop, done := l.stop, l.done
		l.started = true // no Start after Close
		l.mu.Unlock()
		if stop != nil {
			stop()
			<-done
		}
		l.lookupSQL.Close()
		if err := l.db.Close(); err != nil {
			l.closeErr = fmt.Errorf("close file store database: %w", err)
		}
	})
	return l.closeErr
}

// newUUID returns a random (version 4) UUID, as v1's randomUUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// isUUID reports whether s has the textual form of a UUID (any version,
// lowercase or uppercase hex).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
