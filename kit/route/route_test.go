package route

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMatch: Path takes its one path, Prefix every path under it and
// hands its handler the rest.
func TestMatch(t *testing.T) {
	var rest string
	routes := []Route{
		Path("/files", func(http.ResponseWriter, *http.Request) { rest = "(list)" }),
		Prefix("/files/", func(_ http.ResponseWriter, _ *http.Request, r string) { rest = r }),
	}
	for _, tc := range []struct {
		path     string
		matched  bool
		wantRest string
	}{
		{"/files", true, "(list)"},
		{"/files/abc", true, "abc"},
		{"/files/", true, ""},
		{"/filesx", false, ""},
		{"/", false, ""},
	} {
		rest = ""
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		matched := false
		for _, rt := range routes {
			if rt.Match(r) {
				rt.Serve(httptest.NewRecorder(), r)
				matched = true
				break
			}
		}
		if matched != tc.matched || rest != tc.wantRest {
			t.Errorf("%s: matched %v, rest %q; want %v, %q", tc.path, matched, rest, tc.matched, tc.wantRest)
		}
	}
}

// TestAnswers: the shared answers' status, headers and bodies.
func TestAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		answer  func(http.ResponseWriter, *http.Request)
		status  int
		headers http.Header
		body    string
	}{
		{"Unauthorized", http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { Unauthorized(w) }, http.StatusUnauthorized,
			http.Header{"Www-Authenticate": {`Bearer realm="glovebox"`}, "Content-Length": {"0"}}, ""},
		{"MethodNotAllowed", http.MethodPost, func(w http.ResponseWriter, _ *http.Request) { MethodNotAllowed(w, "GET, HEAD") }, http.StatusMethodNotAllowed,
			http.Header{"Allow": {"GET, HEAD"}, "Content-Length": {"0"}}, ""},
		{"JSON GET", http.MethodGet, func(w http.ResponseWriter, r *http.Request) { JSON(w, r, []byte(`{"a":1}`)) }, http.StatusOK,
			http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"private, no-store"}, "Content-Length": {"7"}}, `{"a":1}`},
		{"JSON HEAD", http.MethodHead, func(w http.ResponseWriter, r *http.Request) { JSON(w, r, []byte(`{"a":1}`)) }, http.StatusOK,
			http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"private, no-store"}, "Content-Length": {"7"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.answer(w, httptest.NewRequest(tc.method, "/x", nil))
			if w.Code != tc.status {
				t.Errorf("status = %d, want %d", w.Code, tc.status)
			}
			if diff := cmp.Diff(tc.headers, w.Header()); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if got := w.Body.String(); got != tc.body {
				t.Errorf("body = %q, want %q", got, tc.body)
			}
		})
	}
}

// TestLinesFollow: a follower gets the backlog, then the lines as they
// come, a dropped notice before the line after a loss, until done closes.
func TestLinesFollow(t *testing.T) {
	lines := make(chan []byte)
	done := make(chan struct{})
	dropped := 1
	drop := func() []byte {
		if dropped > 0 {
			dropped--
			return []byte("dropped\n")
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Lines(w, r, done, [][]byte{[]byte("old\n")}, lines, drop)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type = %q, want application/x-ndjson", ct)
	}
	select {
	case lines <- []byte("new\n"):
	case <-ctx.Done():
		t.Fatal("the follower never took a line")
	}
	close(done)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := "old\ndropped\nnew\n"; string(body) != want {
		t.Errorf("body = %q, want %q", body, want)
	}
}
