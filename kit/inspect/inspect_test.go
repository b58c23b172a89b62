package inspect

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
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
