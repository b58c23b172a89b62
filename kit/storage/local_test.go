package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestLocalPut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		meta     Meta
		body     io.Reader
		wantMime string
		wantTTL  time.Duration
		wantErr  string
		isErr    error
	}{
		{name: "empty file", meta: Meta{Name: "empty.txt", Size: 0}, body: strings.NewReader(""), wantMime: "text/plain", wantTTL: time.Hour},
		{name: "guessed mime", meta: Meta{Name: "report.pdf", Size: 5}, body: strings.NewReader("%PDF-"), wantMime: "application/pdf", wantTTL: time.Hour},
		{name: "given mime", meta: Meta{Name: "x.bin", Mime: "image/png", Size: 3}, body: strings.NewReader("abc"), wantMime: "image/png", wantTTL: time.Hour},
		{name: "nested name", meta: Meta{Name: "sub/dir/a.csv", Size: 3}, body: strings.NewReader("a,b"), wantMime: "text/csv", wantTTL: time.Hour},
		{name: "ttl option honoured", meta: Meta{Name: "a.txt", Size: 1, Options: map[string]any{"ttl": "10s"}}, body: strings.NewReader("a"), wantMime: "text/plain", wantTTL: 10 * time.Second},
		{name: "ttl in days", meta: Meta{Name: "a.txt", Size: 1, Options: map[string]any{"ttl": "2d"}}, body: strings.NewReader("a"), wantMime: "text/plain", wantTTL: 48 * time.Hour},
		{name: "other options ignored", meta: Meta{Name: "a.txt", Size: 1, Options: map[string]any{"bucket": "b"}}, body: strings.NewReader("a"), wantMime: "text/plain", wantTTL: time.Hour},
		{name: "one byte reads", meta: Meta{Name: "a.txt", Size: 4}, body: iotest.OneByteReader(strings.NewReader("abcd")), wantMime: "text/plain", wantTTL: time.Hour},
		{name: "bad ttl", meta: Meta{Name: "a.txt", Size: 1, Options: map[string]any{"ttl": "1 fortnight"}}, body: strings.NewReader("a"), wantErr: `duration "1 fortnight"`},
		{name: "ttl not a string", meta: Meta{Name: "a.txt", Size: 1, Options: map[string]any{"ttl": 60.0}}, body: strings.NewReader("a"), wantErr: "ttl must be a duration string"},
		{name: "short content", meta: Meta{Name: "a.txt", Size: 10}, body: strings.NewReader("abc"), wantErr: "short content: got 3 of 10 bytes"},
		{name: "long content", meta: Meta{Name: "a.txt", Size: 2}, body: strings.NewReader("abc"), isErr: ErrTooLarge},
		{name: "negative size", meta: Meta{Name: "a.txt", Size: -1}, body: strings.NewReader(""), wantErr: "negative size"},
		{name: "reader error", meta: Meta{Name: "a.txt", Size: 3}, body: iotest.ErrReader(errors.New("disk on fire")), wantErr: "disk on fire"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clk := newLocal(t, LocalOptions{PublicURL: "https://box.example/"})
			tt.meta.PromptID, tt.meta.SessionID = "prompt-1", "session-1"
			ref, err := l.Put(t.Context(), tt.meta, tt.body)
			if tt.wantErr != "" || tt.isErr != nil {
				if err == nil {
					t.Fatalf("Put = %+v, want error", ref)
				}
				if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Put error = %q, want it to contain %q", err, tt.wantErr)
				}
				if tt.isErr != nil && !errors.Is(err, tt.isErr) {
					t.Errorf("Put error = %v, want %v", err, tt.isErr)
				}
				entries, _ := os.ReadDir(l.Dir())
				if len(entries) != 0 {
					t.Errorf("failed Put left %d files behind", len(entries))
				}
				return
			}
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if !uuidV4.MatchString(ref.ID) {
				t.Errorf("id %q is not a UUID v4", ref.ID)
			}
			want := protocol.FileRef{Kind: "server", Name: tt.meta.Name, Mime: tt.wantMime, Size: tt.meta.Size, ID: ref.ID, URL: "https://box.example/files/" + ref.ID}
			if diff := cmp.Diff(want, ref); diff != "" {
				t.Errorf("Put ref (-want +got):\n%s", diff)
			}
			st, err := os.Stat(filepath.Join(l.Dir(), ref.ID))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 || st.Size() != tt.meta.Size {
				t.Errorf("file mode %v size %d, want 0600 and %d", st.Mode().Perm(), st.Size(), tt.meta.Size)
			}
			var reqID, sessID string
			var created, ttlAt int64
			err = l.db.QueryRow(`SELECT request_id, session_id, created_at, ttl_at FROM files WHERE id = ?`, ref.ID).Scan(&reqID, &sessID, &created, &ttlAt)
			if err != nil {
				t.Fatal(err)
			}
			now := clk.Now().Unix()
			if reqID != "prompt-1" || sessID != "session-1" || created != now || ttlAt != now+int64(tt.wantTTL/time.Second) {
				t.Errorf("row = %s %s %d %d, want prompt-1 session-1 %d %d", reqID, sessID, created, ttlAt, now, now+int64(tt.wantTTL/time.Second))
			}
		})
	}
}

func TestLocalModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := OpenLocal(t.Context(), filepath.Join(dir, "files"), filepath.Join(dir, "state", "files.db"), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	put(t, l, "a.txt", []byte("a"), nil)
	for _, tt := range []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Join(dir, "files"), 0o700 | os.ModeDir},
		{filepath.Join(dir, "state", "files.db"), 0o600},
		{filepath.Join(dir, "state", "files.db-wal"), 0o600},
	} {
		st, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != tt.mode {
			t.Errorf("mode of %s = %v, want %v", tt.path, st.Mode(), tt.mode)
		}
	}
}

func TestLocalDefaultTTLOption(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{DefaultTTL: 5 * time.Minute})
	id := put(t, l, "a.txt", []byte("a"), nil)
	var ttlAt int64
	if err := l.db.QueryRow(`SELECT ttl_at FROM files WHERE id = ?`, id).Scan(&ttlAt); err != nil {
		t.Fatal(err)
	}
	if want := clk.Now().Add(5 * time.Minute).Unix(); ttlAt != want {
		t.Errorf("ttl_at = %d, want %d", ttlAt, want)
	}
}

func TestLocalPutCancelled(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := l.Put(ctx, Meta{Name: "a.txt", Size: 3}, strings.NewReader("abc"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(l.Dir()); len(entries) != 0 {
		t.Errorf("cancelled Put left %d files behind", len(entries))
	}
}

// A file as the source takes the zero-copy path; it must still check the
// length both ways.
func TestLocalPutFromFile(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	data := randomBytes(t, 3<<20+17)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	n := int64(len(data))
	for _, tt := range []struct {
		size    int64
		limit   int64 // wrap the file in io.LimitReader(f, limit) when > 0
		wantErr bool
	}{
		{size: n},
		{size: n - 1, wantErr: true},
		{size: n + 1, wantErr: true},
		{size: n, limit: n},
		{size: n, limit: n + 10},
		{size: n - 1, limit: n - 1},
		{size: n - 1, limit: n, wantErr: true},
		{size: n + 1, limit: n + 1, wantErr: true},
		{size: n, limit: n - 1, wantErr: true},
	} {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = f
		if tt.limit > 0 {
			r = io.LimitReader(f, tt.limit)
		}
		ref, err := l.Put(t.Context(), Meta{Name: "big.bin", Size: tt.size}, r)
		f.Close()
		if (err != nil) != tt.wantErr {
			t.Fatalf("Put(size %d of %d, limit %d) error = %v, want error %v", tt.size, len(data), tt.limit, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		got, err := os.ReadFile(filepath.Join(l.Dir(), ref.ID))
		if err != nil || !bytes.Equal(got, data[:tt.size]) {
			t.Errorf("stored file differs from the source (err %v)", err)
		}
	}
}

func TestLocalOpen(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{})
	data := []byte("hello, box")
	id := put(t, l, "hello.txt", data, map[string]any{"ttl": "10s"})
	missing := put(t, l, "gone.txt", data, nil)
	if err := os.Remove(filepath.Join(l.Dir(), missing)); err != nil {
		t.Fatal(err)
	}
	ref := func(id string) protocol.FileRef {
		return protocol.FileRef{Kind: "server", Name: "f", ID: id, URL: "https://box.example/files/" + id}
	}
	tests := []struct {
		name    string
		ref     protocol.FileRef
		max     int64
		advance time.Duration
		isErr   error
		wantErr string
	}{
		{name: "ok", ref: ref(id)},
		{name: "exact max", ref: ref(id), max: int64(len(data))},
		{name: "over max", ref: ref(id), max: int64(len(data)) - 1, isErr: ErrTooLarge},
		{name: "unknown id", ref: ref("00000000-0000-4000-8000-000000000000"), isErr: ErrNotFound},
		{name: "bad id", ref: ref("../../etc/passwd"), isErr: ErrNotFound},
		{name: "wrong kind", ref: protocol.FileRef{Kind: "inline", Name: "f"}, wantErr: "cannot read a inline ref"},
		{name: "missing file", ref: ref(missing), isErr: ErrNotFound},
		{name: "at ttl_at still there", ref: ref(id), advance: 10 * time.Second},
		{name: "past ttl_at", ref: ref(id), advance: time.Second, isErr: ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Advance(tt.advance)
			rc, err := l.Open(t.Context(), tt.ref, tt.max)
			if tt.isErr != nil || tt.wantErr != "" {
				if err == nil {
					rc.Close()
					t.Fatal("Open succeeded, want an error")
				}
				if tt.isErr != nil && !errors.Is(err, tt.isErr) {
					t.Errorf("Open error = %v, want %v", err, tt.isErr)
				}
				if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Open error = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("Open read %q, %v; want %q", got, err, data)
			}
		})
	}
	if n := rowCount(t, l, missing); n != 0 {
		t.Errorf("row of the missing file still there after Open")
	}
}

// A database written by v1 (no session_id column) opens and reads.
func TestLocalOpensV1Database(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "files.db")
	v1 := openDB(t, dbPath)
	if _, err := v1.Exec(`CREATE TABLE files (id TEXT PRIMARY KEY, request_id TEXT NOT NULL, name TEXT NOT NULL, mime TEXT NOT NULL, size INTEGER NOT NULL, created_at INTEGER NOT NULL, ttl_at INTEGER NOT NULL);
		CREATE INDEX idx_files_request ON files(request_id); CREATE INDEX idx_files_ttl ON files(ttl_at);
		INSERT INTO files VALUES ('11111111-2222-4333-8444-555555555555', 'req', 'old.txt', 'text/plain', 3, 100, 4102444800);`); err != nil {
		t.Fatal(err)
	}
	v1.Close()
	files := filepath.Join(dir, "files")
	if err := os.MkdirAll(files, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "11111111-2222-4333-8444-555555555555"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLocal(t.Context(), files, dbPath, LocalOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("OpenLocal on a v1 database: %v", err)
	}
	defer l.Close()
	rc, err := l.Open(t.Context(), protocol.FileRef{Kind: "server", Name: "old.txt", ID: "11111111-2222-4333-8444-555555555555", URL: "x"}, 0)
	if err != nil {
		t.Fatalf("Open v1 file: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "old" {
		t.Errorf("v1 file = %q, want %q", got, "old")
	}
	put(t, l, "new.txt", []byte("new"), nil)
}

func TestOpenLocalErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	notDB := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(notDB, bytes.Repeat([]byte("not a database "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, dir, db, want string }{
		{"empty", "", "", "needs a directory"},
		{"dir is a file", filepath.Join(notDir, "files"), filepath.Join(dir, "a.db"), "open file store " + notDir},
		{"db is junk", filepath.Join(dir, "files"), notDB, "open file store database " + notDB},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := OpenLocal(t.Context(), tt.dir, tt.db, LocalOptions{})
			if err == nil {
				l.Close()
				t.Fatal("OpenLocal succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("OpenLocal error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLocalClose(t *testing.T) {
	l, _ := newLocal(t, LocalOptions{})
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Put(t.Context(), Meta{Name: "a", Size: 1}, strings.NewReader("a")); err == nil {
		t.Error("Put after Close succeeded")
	}
	if err := l.Start(t.Context()); err == nil {
		t.Error("Start after Close succeeded")
	}
	testkit.NoGoroutines(t, "glovebox/kit/storage.", "database/sql.", "net/http.(*persistConn)", "net/http.(*conn).serve", "net/http/httptest.")
}

// Puts, reads, consumes and sweeps at once: run with -race.
func TestLocalConcurrent(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{})
	srv, handlers := serve(t, l)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				data := bytes.Repeat([]byte{byte(i)}, 1000*(j+1))
				ref, err := l.Put(t.Context(), Meta{Name: "f.bin", Size: int64(len(data))}, bytes.NewReader(data))
				if err != nil {
					errs <- err
					return
				}
				rc, err := l.Open(t.Context(), ref, 0)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, data) {
					errs <- errors.New("read back different bytes")
					return
				}
				url := srv.URL + "/files/" + ref.ID
				if j%2 == 0 {
					url += "?consume=1"
				}
				resp, err := srv.Client().Get(url)
				if err != nil {
					errs <- err
					return
				}
				got, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, data) {
					errs <- errors.New("download differs: " + resp.Status)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := l.Sweep(t.Context(), clk.Now()); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	// A client has the whole body before the handler that consumes the
	// file has deleted it: count once every handler has returned.
	handlers()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var n int
	if err := l.db.QueryRow(`SELECT count(*) FROM files`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(l.Dir())
	if n != 8*5 || len(entries) != 8*5 {
		t.Errorf("after the run: %d rows and %d files, want 40 of each (half were consumed)", n, len(entries))
	}
}
