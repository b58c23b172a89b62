package kit

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

func inline(s string) map[string]any {
	return map[string]any{"kind": "inline", "name": "ignored", "mime": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte(s))}
}

func promptWith(c *v1client, id, text string, inputs map[string]any) {
	c.send(map[string]any{"type": "prompt", "id": id, "text": text, "inputs": inputs})
}

func TestInputs(t *testing.T) {
	srcs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "abc" {
			w.WriteHeader(403)
			return
		}
		fmt.Fprint(w, "from url")
	}))
	defer srcs.Close()
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) {
		o.Adapters = map[string]storage.Adapter{"url": storage.NewURL(storage.URLOptions{AllowLoopback: true})}
	})
	c := b.dial("/", nil)
	promptWith(c, "in", "env GLOVEBOX_INPUT", map[string]any{
		"a.txt":   inline("hello"),
		"ref.csv": map[string]any{"kind": "url", "name": "x", "url": srcs.URL + "/ref.csv", "headers": map[string]string{"X-Token": "abc"}},
	})
	m := last(c.finish("in"))
	dir, _ := m["message"].(string)
	if m["type"] != "complete" || !strings.HasSuffix(dir, c.hello["session_id"].(string)) {
		t.Fatalf("prompt with inputs: %v", m)
	}
	for name, want := range map[string]string{"a.txt": "hello", "ref.csv": "from url"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("input %s = %q, %v; want %q", name, got, err, want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("input dir holds %d entries, want 2 (no temp files)", len(entries))
	}

	for _, tc := range []struct {
		name string
		ref  map[string]any
		want string
	}{
		{"../escape.txt", inline("x"), "path separator"},
		{"/etc/passwd", inline("x"), "path separator"},
		{"..", inline("x"), "not a file name"},
		{".", inline("x"), "not a file name"},
		{"", inline("x"), "empty"},
		{"a\x00b", inline("x"), "NUL"},
		{`a\b`, inline("x"), "separator"},
		{"s3.bin", map[string]any{"kind": "s3", "name": "s3.bin", "bucket": "b", "key": "k"}, "Received s3 FileRef but no s3 storage adapter is registered"},
		{"g.bin", map[string]any{"kind": "gcs", "name": "g.bin", "bucket": "b", "object": "o"}, "Received gcs FileRef but no gcs storage adapter is registered"},
		{"bad.url", map[string]any{"kind": "url", "name": "x", "url": srcs.URL + "/nope"}, "403"},
	} {
		promptWith(c, "bad", "echo never", map[string]any{tc.name: tc.ref})
		fs := c.finish("bad")
		m := last(fs)
		if errCode(m) != protocol.CodeInput && errCode(m) != protocol.CodeBadMessage || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
			t.Errorf("input %q: %v, want an InputError saying %q", tc.name, m, tc.want)
		}
		if len(ofType(fs, "event")) != 0 {
			t.Errorf("input %q: the agent ran", tc.name)
		}
	}
	if _, err := os.Stat(filepath.Join(b.root, "work", "escape.txt")); err == nil {
		t.Error("traversal wrote outside the input dir")
	}
}

// TestInputsPolicy checks that only the kinds the inputs policy names are
// taken.
func TestInputsPolicy(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
		m.StoragePolicy.Inputs = protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "url"}, When: protocol.When{Always: true}}}}
	})
	c := b.dial("/", nil)
	promptWith(c, "p", "echo x", map[string]any{"a.txt": inline("x")})
	if m := last(c.finish("p")); errCode(m) != protocol.CodeInput || !strings.Contains(fmt.Sprint(m["error"]), "not accepted") {
		t.Errorf("inline input under a url-only policy: %v", m)
	}
}

func TestInputTooLarge(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxInput = "4B" })
	c := b.dial("/", nil)
	promptWith(c, "p", "echo x", map[string]any{"a.txt": inline("too large")})
	if m := last(c.finish("p")); errCode(m) != protocol.CodeInput {
		t.Errorf("oversized input: %v", m)
	}
}

func outputsOf(t *testing.T, m map[string]any) map[string]map[string]any {
	t.Helper()
	if m["type"] != "complete" {
		t.Fatalf("prompt failed: %v", m)
	}
	out := map[string]map[string]any{}
	for k, v := range m["outputs"].(map[string]any) {
		out[k] = v.(map[string]any)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestOutputs(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.Now = clock })
	c := b.dial("/", nil)

	c.prompt("1", "write small.txt 10")
	outs := outputsOf(t, last(c.finish("1")))
	if got := keys(outs); strings.Join(got, ",") != "small.txt" || outs["small.txt"]["kind"] != "inline" {
		t.Fatalf("outputs = %v", outs)
	}

	// Only new or changed files: small.txt is not sent again.
	c.prompt("2", "write sub/dir/big.bin 2000000")
	outs = outputsOf(t, last(c.finish("2")))
	big := outs["sub/dir/big.bin"]
	if got := keys(outs); strings.Join(got, ",") != "sub/dir/big.bin" || big["kind"] != "server" || big["size"] != 2000000.0 {
		t.Fatalf("outputs = %v", outs)
	}
	if !strings.HasPrefix(big["url"].(string), b.url+"/files/") {
		t.Errorf("server url = %v", big["url"])
	}

	// Changing a file sends it again.
	c.prompt("3", "write small.txt 11")
	if got := keys(outputsOf(t, last(c.finish("3")))); strings.Join(got, ",") != "small.txt" {
		t.Errorf("after change: %v", got)
	}

	// /files: download, consume.
	id := big["id"].(string)
	resp, body := b.get("/files/"+id, b.auth())
	if resp.StatusCode != 200 || len(body) != 2000000 {
		t.Fatalf("GET /files = %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := b.get("/files/"+id, nil); resp.StatusCode != 401 {
		t.Errorf("GET /files without auth = %d", resp.StatusCode)
	}
	if resp, _ := b.get("/files/"+id+"?consume=1", b.auth()); resp.StatusCode != 200 {
		t.Errorf("consume = %d", resp.StatusCode)
	}
	if resp, _ := b.get("/files/"+id, b.auth()); resp.StatusCode != 404 {
		t.Errorf("after consume = %d, want 404", resp.StatusCode)
	}
	if resp, _ := b.get("/files/a:b", b.auth()); resp.StatusCode != 404 {
		t.Errorf("bad id = %d, want 404", resp.StatusCode)
	}

	// TTL: a per-prompt server_ttl is honoured; past it the file is gone.
	c.send(map[string]any{"type": "prompt", "id": "4", "text": "write ttl.bin 2000000", "outputs_policy": map[string]any{"server_ttl": "10s"}})
	ref := outputsOf(t, last(c.finish("4")))["ttl.bin"]
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	if resp, _ := b.get("/files/"+ref["id"].(string), b.auth()); resp.StatusCode != 410 {
		t.Errorf("after TTL = %d, want 410", resp.StatusCode)
	}

	// A bad override fails before the agent runs.
	c.send(map[string]any{"type": "prompt", "id": "5", "text": "write never.txt 1", "outputs_policy": map[string]any{"s3": map[string]any{"bucket": "b"}}})
	if m := last(c.finish("5")); m["type"] != "error" || !strings.Contains(fmt.Sprint(m["error"]), "declares no s3 storage") {
		t.Errorf("s3 override with no s3 adapter: %v", m)
	}
	sid := c.hello["session_id"].(string)
	if _, err := os.Stat(filepath.Join(b.root, "output", sid, "never.txt")); err == nil {
		t.Error("the agent ran although the outputs policy was invalid")
	}
}

func TestOutputDirective(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	c.prompt("w", "env GLOVEBOX_WORK")
	work := last(c.finish("w"))["message"].(string)
	os.WriteFile(filepath.Join(work, "report.txt"), []byte("report"), 0o644)
	os.WriteFile(filepath.Join(b.root, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(b.root, "secret"), filepath.Join(work, "link"))

	// The directive line goes, the rest of the message stays.
	c.prompt("o", "/output report.txt\nhello there")
	fs := c.finish("o")
	if fs[0]["event_type"] != "hook_invoked" || fs[0]["data"].(map[string]any)["name"] != "output" {
		t.Errorf("first frame = %v", fs[0])
	}
	m := last(fs)
	if m["message"] != `"hello there"` {
		t.Errorf("agent got %v, want the text without the directive", m["message"])
	}
	if r := outputsOf(t, m)["report.txt"]; r == nil || r["data"] != base64.StdEncoding.EncodeToString([]byte("report")) {
		t.Errorf("outputs = %v", m["outputs"])
	}

	// Only hooks: the agent does not run, the file comes back.
	c.prompt("o2", "/output "+filepath.Join(work, "report.txt"))
	if got := keys(outputsOf(t, last(c.finish("o2")))); strings.Join(got, ",") != "report.txt" {
		t.Errorf("outputs = %v", got)
	}

	for _, bad := range []string{"/output /etc/passwd", "/output ../../secret", "/output link", "/output"} {
		c.prompt("bad", bad)
		if m := last(c.finish("bad")); m["type"] != "error" {
			t.Errorf("%q: %v, want an error", bad, m)
		}
	}

	// TagOutput from the agent.
	c.prompt("t", "tag report.txt")
	if got := keys(outputsOf(t, last(c.finish("t")))); strings.Join(got, ",") != "report.txt" {
		t.Errorf("TagOutput: %v", got)
	}

	// /clear-workspace empties the work dir.
	c.prompt("c", "/clear-workspace")
	fs = c.finish("c")
	if fs[0]["data"].(map[string]any)["name"] != "clear-workspace" || last(fs)["type"] != "complete" {
		t.Errorf("clear-workspace: %v", fs)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("work dir after /clear-workspace: %d entries", len(entries))
	}
}

func TestSkills(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) { m.Limits.Timeout = "5m" })
	c := b.dial("/", nil)
	c.prompt("s", "skills\n/environment\n/workspace")
	fs := c.finish("s")
	ev := ofType(fs, "event")
	if len(ev) != 2 || ev[0]["event_type"] != "skill_invoked" || ev[0]["data"].(map[string]any)["source"] != "user" {
		t.Fatalf("events = %v", ev)
	}
	msg := last(fs)["message"].(string)
	sid := c.hello["session_id"].(string)
	if !strings.Contains(msg, "environment={\n  \"name\": \"t\"") || !strings.Contains(msg, filepath.Join(b.root, "work", sid)) || !strings.Contains(msg, `"timeout": "5m"`) {
		t.Errorf("skills = %s", msg)
	}
	if !strings.Contains(msg, "workspace={\n  \"input\": []") {
		t.Errorf("workspace skill = %s", msg)
	}
}

func TestParseDirectives(t *testing.T) {
	for _, tc := range []struct {
		in, text string
		ds       []directive
	}{
		{"plain text", "plain text", nil},
		{"a/b/c", "a/b/c", nil},
		{"/output x.pdf", "", []directive{{dirOutput, "x.pdf"}}},
		{"  /output\tmy file.pdf  \nrest", "rest", []directive{{dirOutput, "my file.pdf"}}},
		{"keep /output mid-line", "keep /output mid-line", nil},
		{"/outputs x", "/outputs x", nil},
		{"a\n/environment\nb\r\n/workspace\r", "a\nb\r", []directive{{dirEnvironment, ""}, {dirWorkspace, ""}}},
		{"/clear-workspace", "", []directive{{dirClearWorkspace, ""}}},
	} {
		text, ds := parseDirectives(tc.in)
		if text != tc.text || fmt.Sprint(ds) != fmt.Sprint(tc.ds) {
			t.Errorf("parseDirectives(%q) = %q, %v, want %q, %v", tc.in, text, ds, tc.text, tc.ds)
		}
	}
}

// TestOutputsAfterQuietPeriod exercises the shortcut that skips reading an
// empty output directory whose mtime has not moved: a file written after
// the directory has been quiet for a while must still be found.
func TestOutputsAfterQuietPeriod(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	c.prompt("1", "echo nothing")
	if outs := outputsOf(t, last(c.finish("1"))); len(outs) != 0 {
		t.Fatalf("outputs = %v", outs)
	}
	time.Sleep(2 * time.Duration(mtimeMargin)) // real time is the subject: the directory's mtime ages past the margin
	c.prompt("2", "echo still nothing")
	if outs := outputsOf(t, last(c.finish("2"))); len(outs) != 0 {
		t.Fatalf("outputs = %v", outs)
	}
	c.prompt("3", "write late.txt 3")
	if got := keys(outputsOf(t, last(c.finish("3")))); strings.Join(got, ",") != "late.txt" {
		t.Errorf("outputs after a quiet period = %v", got)
	}
}
