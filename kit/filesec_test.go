package kit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

func parkAll(m *protocol.Manifest, _ *Options) {
	m.StoragePolicy.Outputs = protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: protocol.AdapterLocalServer}, When: protocol.When{Always: true}}}}
}

func mint(t *testing.T, key, sub string, files []string, scopes ...string) string {
	t.Helper()
	tok, err := protocol.MintToken(key, protocol.TokenClaims{Scopes: scopes, Expires: time.Now().Add(time.Hour), Subject: sub, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestServerRefScope checks that a server input ref follows GET
// /files/{id}'s rules: the credential may read the file, or the file was
// parked by a session of the same credential.
func TestServerRefScope(t *testing.T) {
	b := newBox(t, exec.New(), parkAll)
	park := func(h http.Header, id string) string {
		c := b.dial("/", h)
		defer c.close()
		c.prompt(id, `echo secret-`+id+` > "$GLOVEBOX_OUTPUT/s.txt"`)
		return outputsOf(t, last(c.finish(id)))["s.txt"]["id"].(string)
	}
	useRef := func(h http.Header, fileID string) map[string]any {
		c := b.dial("/", h)
		defer c.close()
		promptWith(c, "use", `cat "$GLOVEBOX_INPUT/in.txt"`, map[string]any{"in.txt": map[string]any{"kind": "server", "name": "in.txt", "id": fileID, "url": b.url + "/files/" + fileID}})
		return last(c.finish("use"))
	}
	keyFile := park(b.auth(), "k1")
	alice := mint(t, b.key, "alice", nil, protocol.ScopeConnect)
	aliceFile := park(bearer(alice), "a1")
	bob := mint(t, b.key, "bob", nil, protocol.ScopeConnect)

	// A connect-only token gets 401 on /files/ID...
	if resp, _ := b.get("/files/"+keyFile, bearer(bob)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /files with a connect-only token = %d, want 401", resp.StatusCode)
	}
	refused := func(m map[string]any) bool {
		msg, _ := m["error"].(map[string]any)["message"].(string)
		return errCode(m) == protocol.CodeInput && strings.Contains(msg, "may not read it")
	}
	for _, tc := range []struct {
		who    string
		h      http.Header
		file   string
		wantOK bool
	}{
		{"connect-only token, the key's file", bearer(bob), keyFile, false},
		{"connect-only token, another subject's file", bearer(bob), aliceFile, false},
		{"connect-only token, an unknown id", bearer(bob), "0123abcd-0000-4000-8000-000000000000", false},
		{"the same subject, another token", bearer(mint(t, b.key, "alice", nil, protocol.ScopeConnect)), aliceFile, true},
		{"the key, any file", b.auth(), aliceFile, true},
		{"a files token for that id", bearer(mint(t, b.key, "bob", []string{keyFile}, protocol.ScopeConnect, protocol.ScopeFiles)), keyFile, true},
		{"a files token for another id", bearer(mint(t, b.key, "bob", []string{aliceFile}, protocol.ScopeConnect, protocol.ScopeFiles)), keyFile, false},
	} {
		t.Run(tc.who, func(t *testing.T) {
			m := useRef(tc.h, tc.file)
			switch {
			case tc.wantOK && (m["type"] != "complete" || !strings.Contains(m["message"].(string), "secret-")):
				t.Errorf("server ref = %v, want the file read", m)
			case !tc.wantOK && !refused(m):
				t.Errorf("server ref = %v, want an InputError refusing it", m)
			}
		})
	}
}

// s3Recorder is an S3 endpoint over real HTTP that accepts every PUT and
// records its path (path-style: /bucket/key).
type s3Recorder struct {
	mu   sync.Mutex
	puts []string
}

func (r *s3Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if req.Method == http.MethodPut {
		r.puts = append(r.puts, req.URL.Path)
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (r *s3Recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.puts
	r.puts = nil
	return p
}

// TestOutputsPolicyConfined checks that a prompt's outputs_policy cannot
// send outputs to a bucket or prefix the box has not declared, and that a
// prompt id cannot become a key segment unchecked.
func TestOutputsPolicyConfined(t *testing.T) {
	rec := &s3Recorder{}
	s3srv := httptest.NewServer(rec)
	defer s3srv.Close()
	b := newBox(t, exec.New(), func(m *protocol.Manifest, o *Options) {
		a, err := storage.NewS3(storage.S3Options{Endpoint: s3srv.URL, PathStyle: true, AccessKeyID: "AKIATEST", SecretAccessKey: "secret", Bucket: "box-bucket", Prefix: "outs"})
		if err != nil {
			t.Fatal(err)
		}
		o.Adapters = map[string]storage.Adapter{protocol.AdapterS3: a}
	})
	c := b.dial("/", b.auth())
	defer c.close()
	for i, tc := range []struct {
		id, bucket, prefix string
		want               string // the PUT path, or "" for a refusal
	}{
		{"p1", "box-bucket", "", "/box-bucket/outs/p1/f.txt"},
		{"p2", "box-bucket", "outs/sub", "/box-bucket/outs/sub/p2/f.txt"},
		{"p3", "attacker-bucket", "", ""},
		{"p4", "box-bucket", "elsewhere", ""},
		{"p5", "box-bucket", "outs/../../etc", ""},
		{"../../p6", "box-bucket", "", ""},
		{"p7\nx", "box-bucket", "", ""},
	} {
		s3 := map[string]any{"bucket": tc.bucket}
		if tc.prefix != "" {
			s3["prefix"] = tc.prefix
		}
		c.send(map[string]any{"type": "prompt", "id": tc.id, "text": `echo x > "$GLOVEBOX_OUTPUT/f.txt"`, "outputs_policy": map[string]any{"s3": s3}})
		m := last(c.finish(tc.id))
		puts := rec.take()
		if tc.want != "" {
			if m["type"] != "complete" || len(puts) != 1 || puts[0] != tc.want {
				t.Errorf("case %d (%q to %s/%s): %v, puts %v, want one PUT to %s", i, tc.id, tc.bucket, tc.prefix, m, puts, tc.want)
			}
			continue
		}
		if errCode(m) != protocol.CodeBadMessage || len(puts) != 0 {
			t.Errorf("case %d (%q to %s/%s): %v, puts %v, want a TypeError and no PUT", i, tc.id, tc.bucket, tc.prefix, m, puts)
		}
	}
}

// TestFilesServedAsDownloads checks /files' headers for agent-written
// HTML: a download under a CSP that forbids everything, unless the box
// opts in to inline files.
func TestFilesServedAsDownloads(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "inline"}[inline], func(t *testing.T) { filesHeaders(t, inline) })
	}
}

func filesHeaders(t *testing.T, inline bool) {
	b := newBox(t, exec.New(), parkAll, func(m *protocol.Manifest, _ *Options) {
		if inline {
			m.Files = &protocol.FilesSpec{Inline: true}
		}
	})
	c := b.dial("/", b.auth())
	c.prompt("h", `echo '<script>fetch("/environment")</script>' > "$GLOVEBOX_OUTPUT/page.html"`)
	id := outputsOf(t, last(c.finish("h")))["page.html"]["id"].(string)
	c.close()
	resp, _ := b.get("/files/"+id, b.auth())
	h := resp.Header
	wantDisp, wantCSP := `attachment; filename="page.html"`, "default-src 'none'; sandbox"
	if inline {
		wantDisp, wantCSP = `inline; filename="page.html"`, ""
	}
	if h.Get("Content-Disposition") != wantDisp || h.Get("Content-Security-Policy") != wantCSP || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("inline %v: Content-Disposition %q, CSP %q, nosniff %q; want %q, %q, nosniff", inline, h.Get("Content-Disposition"), h.Get("Content-Security-Policy"), h.Get("X-Content-Type-Options"), wantDisp, wantCSP)
	}
}
