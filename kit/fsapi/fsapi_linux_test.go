package fsapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/fsapi"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// fsServer serves s's files at /fs over loopback.
type fsServer struct {
	t   *testing.T
	url string
}

func serve(t *testing.T, s fsapi.Session, lim fsapi.Limits) *fsServer {
	t.Helper()
	sv := fsapi.New(lim, testkit.Logger(t, slog.LevelDebug))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/fs")
		if !ok {
			http.NotFound(w, r)
			return
		}
		sv.Serve(w, r, s, rest)
	}))
	t.Cleanup(ts.Close)
	return &fsServer{t: t, url: ts.URL + "/fs"}
}

// do sends a request and returns the status and body.
func (f *fsServer) do(method, p string, body io.Reader, h ...string) (int, []byte, http.Header) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(f.t, method+" "+p), method, f.url+p, body)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, p, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// newLocal is a session of three fresh directories, served.
func newLocal(t *testing.T) (*localSession, *fsServer) {
	t.Helper()
	base := t.TempDir()
	var dirs []string
	for _, r := range protocol.FSRoots {
		d := filepath.Join(base, r)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	s := &localSession{id: "s1", ctx: context.Background(), files: &localFiles{dirs: dirs}, left: -1}
	return s, serve(t, s, fsapi.Limits{})
}

func TestPutGetRange(t *testing.T) {
	s, f := newLocal(t)
	code, body, _ := f.do("PUT", "/work/a/b.txt?parents=1", strings.NewReader("hello, world"))
	if code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", code, body)
	}
	var e protocol.FSEntry
	if err := json.Unmarshal(body, &e); err != nil || e.Path != "work/a/b.txt" || e.Size != 12 || e.Type != protocol.FSFile {
		t.Fatalf("PUT answered %s (%v), want the entry of work/a/b.txt", body, err)
	}
	if b, err := os.ReadFile(filepath.Join(s.files.dirs[0], "a", "b.txt")); err != nil || string(b) != "hello, world" {
		t.Fatalf("the file holds %q, %v", b, err)
	}
	code, body, h := f.do("GET", "/work/a/b.txt", nil)
	if code != 200 || string(body) != "hello, world" || h.Get("ETag") == "" || h.Get("Content-Length") != "12" {
		t.Fatalf("GET = %d %q %v", code, body, h)
	}
	code, body, _ = f.do("GET", "/work/a/b.txt", nil, "Range", "bytes=7-")
	if code != http.StatusPartialContent || string(body) != "world" {
		t.Fatalf("GET Range bytes=7- = %d %q, want 206 \"world\"", code, body)
	}
	if code, _, _ = f.do("GET", "/work/a/b.txt", nil, "If-None-Match", h.Get("ETag")); code != http.StatusNotModified {
		t.Errorf("GET If-None-Match its ETag = %d, want 304", code)
	}
	// Replaced whole, keeping its mode; appended to.
	os.Chmod(filepath.Join(s.files.dirs[0], "a", "b.txt"), 0o750)
	if code, body, _ = f.do("PUT", "/work/a/b.txt", strings.NewReader("new")); code != http.StatusCreated {
		t.Fatalf("PUT over = %d %s", code, body)
	}
	if code, body, _ = f.do("PUT", "/work/a/b.txt?append=1", strings.NewReader("+more")); code != http.StatusCreated {
		t.Fatalf("PUT ?append = %d %s", code, body)
	}
	if _, body, _ = f.do("GET", "/work/a/b.txt", nil); string(body) != "new+more" {
		t.Errorf("after PUT and append the file holds %q", body)
	}
	if st, _ := os.Stat(filepath.Join(s.files.dirs[0], "a", "b.txt")); st.Mode().Perm() != 0o750 {
		t.Errorf("the replaced file's mode is %v, want its old 0750", st.Mode())
	}
	ents, _ := os.ReadDir(filepath.Join(s.files.dirs[0], "a"))
	if len(ents) != 1 {
		t.Errorf("the directory holds %d files after the PUTs, want 1 (no temporary file left)", len(ents))
	}
}

func TestListPaged(t *testing.T) {
	s, f := newLocal(t)
	const n = 2500
	dir := filepath.Join(s.files.dirs[0], "many")
	os.Mkdir(dir, 0o755)
	for i := range n {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), []byte("x"), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		code, body, _ := f.do("GET", "/work/many?limit=1000&after="+after, nil)
		if code != 200 {
			t.Fatalf("GET page %d = %d %s", pages, code, body)
		}
		var l protocol.FSList
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Entries) > 1000 {
			t.Fatalf("a page of %d entries, over the limit", len(l.Entries))
		}
		pages++
		for _, e := range l.Entries {
			if seen[e.Name] {
				t.Fatalf("%s listed twice", e.Name)
			}
			seen[e.Name] = true
			if e.Name == "link" && (e.Type != protocol.FSSymlink || e.Target != "/etc/passwd") {
				t.Errorf("the link is listed as %+v", e)
			}
			if e.Name == "f00001" && (e.Type != protocol.FSFile || e.Size != 1 || e.Path != "work/many/f00001") {
				t.Errorf("f00001 is listed as %+v", e)
			}
		}
		if l.Next == "" {
			break
		}
		after = l.Next
	}
	if len(seen) != n+1 || pages != 3 {
		t.Errorf("listed %d entries in %d pages, want %d in 3", len(seen), pages, n+1)
	}
	if code, body, _ := f.do("GET", "/work/many?limit=x", nil); code != 400 {
		t.Errorf("?limit=x = %d %s, want 400", code, body)
	}
	if code, body, _ := f.do("GET", "/work/many?after=-5", nil); code != 400 {
		t.Errorf("?after=-5 = %d %s, want 400", code, body)
	}
}

func TestStatAndRoots(t *testing.T) {
	s, f := newLocal(t)
	os.Symlink("../input", filepath.Join(s.files.dirs[0], "up"))
	code, body, _ := f.do("GET", "/work/up?stat=1", nil)
	var e protocol.FSEntry
	if json.Unmarshal(body, &e); code != 200 || e.Type != protocol.FSSymlink || e.Target != "../input" || e.Path != "work/up" {
		t.Errorf("stat of a link = %d %s", code, body)
	}
	code, body, _ = f.do("GET", "", nil)
	var l protocol.FSList
	if json.Unmarshal(body, &l); code != 200 || len(l.Entries) != 3 || l.Entries[0].Path != "work" || l.Entries[2].Type != protocol.FSDir {
		t.Errorf("GET /fs = %d %s, want the three roots", code, body)
	}
}

// TestRefused: what would leave the session's directories, special
// files and odd paths get clear errors naming the session's path, and
// touch nothing.
func TestRefused(t *testing.T) {
	s, f := newLocal(t)
	work := s.files.dirs[0]
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644)
	os.Symlink(outside, filepath.Join(work, "out"))
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(work, "secret"))
	syscall.Mkfifo(filepath.Join(work, "fifo"), 0o644)
	for _, tc := range []struct {
		method, path string
		body         string
		want         int
		says         string
	}{
		{"GET", "/work/../etc/passwd", "", 400, `a ".." name`},
		{"GET", "/work/a%5Cb", "", 400, "backslash"},
		{"GET", "/tmp/x", "", 400, "not one of the session's directories"},
		{"GET", "/work/out/secret", "", 403, "work/out/secret leads outside"},
		{"PUT", "/work/out/new", "x", 403, "leads outside"},
		{"GET", "/work/secret", "", 409, "work/secret is a symbolic link"},
		{"GET", "/work/fifo", "", 400, "work/fifo is a special file"},
		{"PUT", "/work/fifo?append=1", "x", 400, "special file"},
		{"GET", "/work/nope", "", 404, "work/nope: no such file"},
		{"DELETE", "/work", "", 400, "itself"},
		{"PUT", "/work", "x", 400, "itself"},
		{"POST", "/work/out?op=move", `{"to":"work/x/../../y"}`, 400, `a ".." name`},
		{"POST", "/work/a?op=chmod", ``, 400, `op "chmod"`},
		{"PATCH", "/work/a", ``, 405, "allowed"},
	} {
		code, body, _ := f.do(tc.method, tc.path, strings.NewReader(tc.body))
		if code != tc.want || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s %s = %d %q, want %d saying %q", tc.method, tc.path, code, body, tc.want, tc.says)
		}
		if strings.Contains(string(body), work) || strings.Contains(string(body), outside) {
			t.Errorf("%s %s names a host path: %q", tc.method, tc.path, body)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the directory outside holds %d files, want its 1", len(ents))
	}
}

func TestMkdirMoveRemove(t *testing.T) {
	s, f := newLocal(t)
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/work/d/e?op=mkdir", ``, 404},
		{"POST", "/work/d/e?op=mkdir", `{"parents":true}`, 201},
		{"POST", "/work/d?op=mkdir", ``, 409},
		{"PUT", "/work/d/e/f.txt", "f", 201},
		{"POST", "/work/d/e/f.txt?op=move", `{"to":"output/f.txt"}`, 200},
		{"GET", "/output/f.txt", ``, 200},
		{"DELETE", "/work/d", ``, 409},
		{"DELETE", "/work/d?recursive=1", ``, 204},
		{"DELETE", "/output/f.txt", ``, 204},
		{"DELETE", "/output/f.txt", ``, 404},
	} {
		code, body, _ := f.do(tc.method, tc.path, strings.NewReader(tc.body))
		if code != tc.want {
			t.Errorf("%s %s %s = %d %s, want %d", tc.method, tc.path, tc.body, code, body, tc.want)
		}
	}
	for _, d := range s.files.dirs {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s holds %d files after the removals", d, len(ents))
		}
	}
}

func TestDiskLimit(t *testing.T) {
	s, f := newLocal(t)
	s.left = 100
	if code, body, _ := f.do("PUT", "/work/big", bytes.NewReader(make([]byte, 101))); code != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT of 101 bytes with 100 left = %d %s, want 413", code, body)
	}
	// Without a Content-Length, the copy stops at the limit.
	if code, body, _ := f.do("PUT", "/work/big", io.MultiReader(bytes.NewReader(make([]byte, 60)), bytes.NewReader(make([]byte, 60)))); code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked PUT of 120 bytes with 100 left = %d %s, want 413", code, body)
	}
	if ents, _ := os.ReadDir(s.files.dirs[0]); len(ents) != 0 {
		t.Errorf("a refused PUT left %d files", len(ents))
	}
	if code, body, _ := f.do("PUT", "/work/small", bytes.NewReader(make([]byte, 100))); code != http.StatusCreated {
		t.Errorf("PUT of 100 bytes with 100 left = %d %s, want 201", code, body)
	}
}

func TestEnded(t *testing.T) {
	s, f := newLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	s.ctx = ctx
	cancel()
	if code, body, _ := f.do("GET", "/work/x", nil); code != http.StatusGone {
		t.Errorf("GET on an ended session = %d %s, want 410", code, body)
	}
}

// events reads a watch's NDJSON lines.
type events struct {
	t    *testing.T
	sc   *bufio.Scanner
	body io.Closer
}

func (f *fsServer) watch(p string) *events {
	f.t.Helper()
	ctx, cancel := context.WithCancel(testkit.Context(f.t, "the watch's events"))
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+p+"?watch=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		f.t.Fatalf("watch %s = %d %s", p, resp.StatusCode, b)
	}
	f.t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &events{t: f.t, sc: bufio.NewScanner(resp.Body), body: resp.Body}
}

// next returns the next event not of a type in skip.
func (e *events) next(skip ...string) protocol.FSEvent {
	e.t.Helper()
	for e.sc.Scan() {
		var ev protocol.FSEvent
		if err := json.Unmarshal(e.sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("watch line %q: %v", e.sc.Bytes(), err)
		}
		if !contains(skip, ev.Type) {
			return ev
		}
	}
	e.t.Fatalf("the watch ended: %v", e.sc.Err())
	return protocol.FSEvent{}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestWatch(t *testing.T) {
	s, f := newLocal(t)
	work := s.files.dirs[0]
	os.MkdirAll(filepath.Join(work, "pre", "sub"), 0o755)
	ev := f.watch("/work")
	want := func(typ, p, from string) {
		t.Helper()
		got := ev.next()
		if got.Type != typ || got.Path != p || got.From != from {
			t.Fatalf("event %+v, want %s %s (from %q)", got, typ, p, from)
		}
	}
	os.WriteFile(filepath.Join(work, "a.txt"), []byte("a"), 0o644)
	want("create", "work/a.txt", "")
	want("write", "work/a.txt", "")
	os.Rename(filepath.Join(work, "a.txt"), filepath.Join(work, "pre", "sub", "b.txt"))
	want("rename", "work/pre/sub/b.txt", "work/a.txt")
	os.Remove(filepath.Join(work, "pre", "sub", "b.txt"))
	want("remove", "work/pre/sub/b.txt", "")
	// A new directory is watched, and what it holds by then reported.
	os.Mkdir(filepath.Join(work, "new"), 0o755)
	want("create", "work/new", "")
	os.WriteFile(filepath.Join(work, "new", "c"), nil, 0o644)
	if got := ev.next(); got.Path != "work/new/c" || got.Type != "create" {
		t.Fatalf("event %+v, want create work/new/c", got)
	}
	// A renamed directory's watch follows it.
	os.Rename(filepath.Join(work, "new"), filepath.Join(work, "renamed"))
	got := ev.next("write")
	if got.Type != "rename" || got.Path != "work/renamed" || got.From != "work/new" || !got.Dir {
		t.Fatalf("event %+v, want rename work/new to work/renamed", got)
	}
	os.Remove(filepath.Join(work, "renamed", "c"))
	want("remove", "work/renamed/c", "")
}

func TestWatchLimits(t *testing.T) {
	s, _ := newLocal(t)
	f := serve(t, s, fsapi.Limits{WatchDirs: 2, SessionWatches: 1})
	work := s.files.dirs[0]
	for _, d := range []string{"a", "b", "c"} {
		os.Mkdir(filepath.Join(work, d), 0o755)
	}
	ev := f.watch("/work")
	if got := ev.next(); got.Type != protocol.FSEventLost || !strings.Contains(got.Message, "covers 2 directories") {
		t.Errorf("first event %+v, want lost: the limit of directories", got)
	}
	if code, body, _ := f.do("GET", "/work?watch=1", nil); code != http.StatusTooManyRequests {
		t.Errorf("a second watch = %d %s, want 429", code, body)
	}
	if code, body, _ := f.do("GET", "/work/nope?watch=1", nil); code != http.StatusTooManyRequests && code != 404 {
		t.Errorf("watch of nothing = %d %s", code, body)
	}
}

func BenchmarkList10000(b *testing.B) {
	base := b.TempDir()
	var dirs []string
	for _, r := range protocol.FSRoots {
		d := filepath.Join(base, r)
		os.Mkdir(d, 0o755)
		dirs = append(dirs, d)
	}
	for i := range 10000 {
		os.WriteFile(filepath.Join(dirs[0], fmt.Sprintf("f%05d", i)), nil, 0o644)
	}
	s := &localSession{id: "s1", ctx: context.Background(), files: &localFiles{dirs: dirs}, left: -1}
	sv := fsapi.New(fsapi.Limits{}, nil)
	for b.Loop() {
		w := httptest.NewRecorder()
		sv.Serve(w, httptest.NewRequest("GET", "/fs/work?limit=10000", nil), s, "/work")
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
