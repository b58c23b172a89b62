package storage

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServeFile(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{})
	srv, _ := serve(t, l)
	data := []byte(`{"ok":true}`)
	id := put(t, l, `a b"c.json`, data, map[string]any{"ttl": "30s"})
	short := put(t, l, "short.txt", []byte("bye"), map[string]any{"ttl": "5s"})
	unsafe := put(t, l, "répertoire/ü.txt", []byte("u"), nil)
	empty := put(t, l, "", []byte("e"), nil)
	// A store whose clock moved past short's TTL, but no sweep ran yet.
	clk.Advance(6 * time.Second)

	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantHeader http.Header
		wantBody   string
	}{
		{name: "ok", method: "GET", path: "/files/" + id, wantStatus: 200, wantBody: string(data), wantHeader: http.Header{
			"Content-Type":            {"application/json"},
			"Content-Length":          {"11"},
			"Content-Disposition":     {`attachment; filename="a_b_c.json"`},
			"Content-Security-Policy": {"default-src 'none'; sandbox"},
			"Cache-Control":           {"private, no-store"},
			"X-Content-Type-Options":  {"nosniff"},
		}},
		{name: "head", method: "HEAD", path: "/files/" + id, wantStatus: 200, wantHeader: http.Header{
			"Content-Type":   {"application/json"},
			"Content-Length": {"11"},
		}},
		{name: "non-ascii name", method: "GET", path: "/files/" + unsafe, wantStatus: 200, wantBody: "u", wantHeader: http.Header{
			"Content-Disposition": {`attachment; filename="r__pertoire___.txt"`},
		}},
		{name: "empty name", method: "GET", path: "/files/" + empty, wantStatus: 200, wantBody: "e", wantHeader: http.Header{
			"Content-Disposition": {`attachment; filename="file"`},
		}},
		{name: "query other than consume", method: "GET", path: "/files/" + id + "?x=1", wantStatus: 200, wantBody: string(data)},
		{name: "expired", method: "GET", path: "/files/" + short, wantStatus: 410},
		{name: "unknown id", method: "GET", path: "/files/no-such-file", wantStatus: 404},
		{name: "id with a colon", method: "GET", path: "/files/a:b", wantStatus: 404},
		{name: "id with a dot", method: "GET", path: "/files/" + id + ".", wantStatus: 404},
		{name: "post", method: "POST", path: "/files/" + id, wantStatus: 405, wantHeader: http.Header{"Allow": {"GET, HEAD"}}},
		{name: "delete", method: "DELETE", path: "/files/" + id, wantStatus: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.wantStatus)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
			got := http.Header{}
			for k := range tt.wantHeader {
				got[k] = resp.Header.Values(k)
			}
			if diff := cmp.Diff(tt.wantHeader, got); diff != "" && tt.wantHeader != nil {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
	// Serving never deletes without consume, and 410 leaves the sweep to
	// remove the file.
	for _, id := range []string{id, short} {
		if !fileExists(t, l, id) || rowCount(t, l, id) != 1 {
			t.Errorf("file %s was removed by a plain GET", id)
		}
	}
}

func get(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestServeFileConsume(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	srv, wait := serve(t, l)
	data := randomBytes(t, 100_000)
	for _, tt := range []struct {
		query       string
		wantDeleted bool
	}{
		{"?consume=1", true},
		{"?consume=true", false},
		{"?consume=0", false},
		{"?consume=", false},
		{"?consume=1&consume=2", true},
	} {
		t.Run(tt.query, func(t *testing.T) {
			id := put(t, l, "c.bin", data, nil)
			status, body := get(t, srv, "/files/"+id+tt.query)
			if status != 200 || !bytes.Equal(body, data) {
				t.Fatalf("GET%s = %d with %d bytes, want 200 with %d", tt.query, status, len(body), len(data))
			}
			wait()
			deleted := !fileExists(t, l, id) && rowCount(t, l, id) == 0
			if deleted != tt.wantDeleted {
				t.Errorf("after GET%s: deleted = %v, want %v", tt.query, deleted, tt.wantDeleted)
			}
			wantStatus := 200
			if tt.wantDeleted {
				wantStatus = 404
			}
			if status, _ := get(t, srv, "/files/"+id); status != wantStatus {
				t.Errorf("second GET = %d, want %d", status, wantStatus)
			}
		})
	}
	t.Run("head does not consume", func(t *testing.T) {
		id := put(t, l, "c.bin", data, nil)
		resp, err := srv.Client().Head(srv.URL + "/files/" + id + "?consume=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		wait()
		if resp.StatusCode != 200 || !fileExists(t, l, id) {
			t.Errorf("HEAD ?consume=1 = %d, file kept %v; want 200 and kept", resp.StatusCode, fileExists(t, l, id))
		}
	})
}

// A client that hangs up mid-body must not lose the file.
func TestServeFileConsumeDisconnect(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	srv, wait := serve(t, l)
	// Larger than every socket buffer between the two ends, so the server
	// cannot finish writing before the client hangs up.
	data := randomBytes(t, 64<<20)
	id := put(t, l, "big.bin", data, nil)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "GET /files/"+id+"?consume=1 HTTP/1.1\r\nHost: box\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetLinger(0) // reset, as a crashed client would
	conn.Close()
	wait()

	if !fileExists(t, l, id) || rowCount(t, l, id) != 1 {
		t.Fatal("an interrupted consume deleted the file")
	}
	status, body := get(t, srv, "/files/"+id+"?consume=1")
	if status != 200 || !bytes.Equal(body, data) {
		t.Fatalf("retry = %d with %d bytes, want 200 with %d", status, len(body), len(data))
	}
	wait()
	if fileExists(t, l, id) || rowCount(t, l, id) != 0 {
		t.Error("a complete consume left the file behind")
	}
}

// Of several concurrent consumers exactly one gets the file.
func TestServeFileConcurrentConsumers(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	srv, wait := serve(t, l)
	data := randomBytes(t, 4<<20)
	id := put(t, l, "once.bin", data, nil)
	const consumers = 6
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range consumers {
		wg.Go(func() {
			resp, err := srv.Client().Get(srv.URL + "/files/" + id + "?consume=1")
			if err != nil {
				t.Error(err)
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Error(err)
				return
			}
			if resp.StatusCode == 200 && !bytes.Equal(body, data) {
				t.Errorf("a consumer got 200 with %d bytes, want %d", len(body), len(data))
			}
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	wait()
	if diff := cmp.Diff(map[int]int{200: 1, 404: consumers - 1}, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if fileExists(t, l, id) {
		t.Error("file still there after consumption")
	}
}

// v1 crashed the process when a row's file was gone; here it is a 404 and
// the row goes.
func TestServeFileMissingBackingFile(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	srv, _ := serve(t, l)
	id := put(t, l, "gone.txt", []byte("gone"), nil)
	other := put(t, l, "other.txt", []byte("still here"), nil)
	if err := os.Remove(filepath.Join(l.Dir(), id)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?consume=1", ""} {
		if status, _ := get(t, srv, "/files/"+id+q); status != 404 {
			t.Errorf("GET missing file%s = %d, want 404", q, status)
		}
	}
	if rowCount(t, l, id) != 0 {
		t.Error("the dangling row was not removed")
	}
	if status, body := get(t, srv, "/files/"+other); status != 200 || string(body) != "still here" {
		t.Errorf("server after a missing file: GET other = %d %q", status, body)
	}
}

// A file whose size no longer matches its row is not served truncated.
func TestServeFileSizeMismatch(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{})
	srv, _ := serve(t, l)
	id := put(t, l, "a.txt", []byte("abcdef"), nil)
	if err := os.Truncate(filepath.Join(l.Dir(), id), 3); err != nil {
		t.Fatal(err)
	}
	if status, _ := get(t, srv, "/files/"+id); status != 500 {
		t.Errorf("GET truncated file = %d, want 500", status)
	}
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func TestSafeFilename(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{`a b"c.bin`, "a_b_c.bin"},
		{"report.pdf", "report.pdf"},
		{"", "file"},
		{"../../etc/passwd", ".._.._etc_passwd"},
		{"x\r\nSet-Cookie: a=b", "x__Set-Cookie__a_b"},
		{"ü", "__"},
	} {
		if got := SafeFilename(tt.in); got != tt.want {
			t.Errorf("SafeFilename(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSafeFilename(f *testing.F) {
	for _, s := range []string{"", `a b"c.bin`, "ü", "\x00", "a/b\\c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := SafeFilename(s)
		if !safeName.MatchString(got) {
			t.Fatalf("SafeFilename(%q) = %q, has unsafe characters", s, got)
		}
		if s != "" && len(got) != len(s) {
			t.Fatalf("SafeFilename(%q) = %q, length changed", s, got)
		}
	})
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func FuzzValidID(f *testing.F) {
	for _, s := range []string{"", "a:b", "0f8fad5b-d9cb-469f-a165-70867728950e", "..", "a_b-C9", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := idPattern.MatchString(s) && len(s) <= 128
		if got := ValidID(s); got != want {
			t.Fatalf("ValidID(%q) = %v, want %v", s, got, want)
		}
		if ValidID(s) && strings.ContainsAny(s, "/.\\\x00") {
			t.Fatalf("ValidID(%q) accepts a path character", s)
		}
	})
}

// TestServeFileInline checks the opt-in to v1's headers: inline, no CSP,
// nosniff still.
func TestServeFileInline(t *testing.T) {
	t.Parallel()
	l, _ := newLocal(t, LocalOptions{Inline: true})
	srv, _ := serve(t, l)
	id := put(t, l, "page.html", []byte("<p>hi</p>"), nil)
	resp, err := srv.Client().Get(srv.URL + "/files/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Content-Disposition"); got != `inline; filename="page.html"` {
		t.Errorf("Content-Disposition = %q, want inline", got)
	}
	if got := resp.Header.Get("Content-Security-Policy"); got != "" {
		t.Errorf("Content-Security-Policy = %q, want none when the box opts in to inline files", got)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
}
