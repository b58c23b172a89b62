package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestMain fails the run when goroutines started by this package's code
// (sweep loops, database pools, HTTP clients and servers) outlive it.
func TestMain(m *testing.M) { testkit.Main(m) }

// testLogger writes to the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return testkit.Logger(t, slog.LevelDebug)
}

// clock is a settable time source for the Now seam.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newLocal opens a store in a temp dir with a settable clock; it is closed
// when the test ends.
func newLocal(t testing.TB, opts LocalOptions) (*Local, *clock) {
	t.Helper()
	c := newClock()
	if opts.Now == nil {
		opts.Now = c.Now
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	if opts.PublicURL == "" {
		opts.PublicURL = "https://box.example"
	}
	dir := t.TempDir()
	l, err := OpenLocal(t.Context(), filepath.Join(dir, "files"), filepath.Join(dir, "files.db"), opts)
	if err != nil {
		t.Fatalf("OpenLocal: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l, c
}

// serve mounts l.ServeFile at /files/{id} on a loopback server. The
// returned wait blocks until every request the server got has finished.
func serve(t testing.TB, l *Local) (srv *httptest.Server, wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	mux := http.NewServeMux()
	mux.HandleFunc("/files/{id}", func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		l.ServeFile(w, r, r.PathValue("id"))
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, wg.Wait
}

// randomBytes returns n random bytes.
func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// put stores data in l under name with the given options.
func put(t testing.TB, l *Local, name string, data []byte, opts map[string]any) string {
	t.Helper()
	ref, err := l.Put(context.Background(), Meta{Name: name, Size: int64(len(data)), PromptID: "p1", Options: opts}, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put(%s): %v", name, err)
	}
	return ref.ID
}

// rowCount counts the index rows for id, reading the database directly.
func rowCount(t testing.TB, l *Local, id string) int {
	t.Helper()
	var n int
	if err := l.db.QueryRow(`SELECT count(*) FROM files WHERE id = ?`, id).Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

// fileExists reports whether id's file is in l's directory.
func fileExists(t testing.TB, l *Local, id string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(l.Dir(), id))
	return err == nil
}

// openDB opens a SQLite database file independently of the store.
func openDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
