package inspect

import (
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStaticNeedsNoInlineCode checks the page against its CSP (script-src
// 'self', style-src 'self'): no inline script, handler or style.
func TestStaticNeedsNoInlineCode(t *testing.T) {
	files := Static()
	for _, name := range []string{"index.html", "app.js", "app.css"} {
		if _, err := fs.Stat(files, name); err != nil {
			t.Errorf("%s is not embedded: %v", name, err)
		}
	}
	html, err := fs.ReadFile(files, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	for what, re := range map[string]*regexp.Regexp{
		"inline script":      regexp.MustCompile(`<script(\s[^>]*)?>[^<]`),
		"script without src": regexp.MustCompile(`<script(?:\s(?:[^>s]|s[^r]|sr[^c])*)?>`),
		"event handler":      regexp.MustCompile(`\son[a-z]+\s*=`),
		"style attribute":    regexp.MustCompile(`\sstyle\s*=`),
		"style element":      regexp.MustCompile(`<style`),
	} {
		if loc := re.FindIndex(html); loc != nil {
			t.Errorf("index.html has an %s at byte %d: %q", what, loc[0], html[loc[0]:min(loc[1]+20, len(html))])
		}
	}
	scripts, _ := fs.Glob(files, "*.js")
	for _, name := range scripts {
		js, _ := fs.ReadFile(files, name)
		if regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`).Match(js) {
			t.Errorf("%s parses strings as HTML or code: the box's data must go in as text", name)
		}
		if !strings.Contains(string(html), `<script src="`+name+`" defer></script>`) {
			t.Errorf("index.html does not load %s", name)
		}
	}
}

// The vendored terminal emulator is served beside the page, and nothing
// else under a subdirectory is.
func TestVendoredTerminalServed(t *testing.T) {
	in := New(Options{Now: time.Now, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(http.HandlerFunc(in.serve))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		path, ctype string
		want        int
	}{
		{"/inspect/vendor/xterm/xterm.js", "text/javascript; charset=utf-8", http.StatusOK},
		{"/inspect/vendor/xterm/addon-fit.js", "text/javascript; charset=utf-8", http.StatusOK},
		{"/inspect/vendor/xterm/xterm.css", "text/css; charset=utf-8", http.StatusOK},
		{"/inspect/vendor/xterm/LICENSE", "text/plain; charset=utf-8", http.StatusOK},
		{"/inspect/shell.js", "text/javascript; charset=utf-8", http.StatusOK},
		{"/inspect/vendor/xterm", "", http.StatusNotFound},
		{"/inspect/vendor/xterm/nosuch.js", "", http.StatusNotFound},
		{"/inspect/vendor/xterm/../../app.js", "", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
		req.URL.Opaque = c.path // as sent, not cleaned by the client
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want || c.ctype != "" && resp.Header.Get("Content-Type") != c.ctype {
			t.Errorf("GET %s = %d %q, want %d %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.want, c.ctype)
		}
		if resp.Header.Get("Content-Security-Policy") != csp {
			t.Errorf("GET %s: no CSP", c.path)
		}
	}
	html, _ := fs.ReadFile(Static(), "index.html")
	for _, want := range []string{`<script src="vendor/xterm/xterm.js" defer></script>`, `<script src="vendor/xterm/addon-fit.js" defer></script>`, `<link rel="stylesheet" href="vendor/xterm/xterm.css">`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("index.html lacks %s", want)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"https://Box.Example", "box.example", true},
		{"http://127.0.0.1:8081", "127.0.0.1:8080", false},
		{"http://evil.example", "box.example", false},
		{"null", "box.example", false},
		{"", "box.example", false},
		{"file://box.example", "box.example", false},
		{"http://box.example.evil.example", "box.example", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/inspect/api/sessions/x/terminals/t1", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if got := sameOrigin(r); got != c.want {
			t.Errorf("sameOrigin(Origin %q, Host %q) = %v, want %v", c.origin, c.host, got, c.want)
		}
	}
}
