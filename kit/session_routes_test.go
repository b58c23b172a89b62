package kit

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestSessionRoutesAuth(t *testing.T) {
	b := newBox(t, scripted(nil))
	mint := b.tokenFor
	alice := mint("alice", protocol.ScopeConnect)
	c := b.dial("/", bearer(alice))
	id := c.hello["session_id"].(string)
	var got []string
	sr := &sessionRoutes{auth: b.srv.auth, live: &b.srv.live, features: []sessionFeature{{
		name: "probe", scope: protocol.ScopeExec,
		serve: func(w http.ResponseWriter, r *http.Request, ss *session, rest string) {
			got = append(got, ss.id+" "+rest)
			io.WriteString(w, "ok")
		},
	}}}
	rt := sr.routes()[0]
	for _, tc := range []struct {
		name, path string
		h          http.Header
		want       int
	}{
		{"no bearer", "/sessions/" + id + "/probe", nil, http.StatusUnauthorized},
		{"a wrong key", "/sessions/" + id + "/probe", bearer("nope"), http.StatusUnauthorized},
		{"the key", "/sessions/" + id + "/probe/a/b", b.auth(), http.StatusOK},
		{"the session's credential", "/sessions/" + id + "/probe", bearer(alice), http.StatusOK},
		{"the same subject", "/sessions/" + id + "/probe", bearer(mint("alice", protocol.ScopeConnect)), http.StatusOK},
		{"another subject", "/sessions/" + id + "/probe", bearer(mint("bob", protocol.ScopeConnect)), http.StatusNotFound},
		{"the feature's scope", "/sessions/" + id + "/probe", bearer(mint("", protocol.ScopeExec)), http.StatusOK},
		{"admin", "/sessions/" + id + "/probe", bearer(mint("", protocol.ScopeAdmin)), http.StatusOK},
		{"another scope", "/sessions/" + id + "/probe", bearer(mint("", protocol.ScopeWorkspace)), http.StatusUnauthorized},
		{"no such session", "/sessions/nope/probe", b.auth(), http.StatusNotFound},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		for k, v := range tc.h {
			req.Header[k] = v
		}
		if !rt.Match(req) {
			t.Fatalf("%s: %s does not match", tc.name, tc.path)
		}
		w := httptest.NewRecorder()
		rt.Serve(w, req)
		if w.Code != tc.want {
			t.Errorf("%s: GET %s = %d %s, want %d", tc.name, tc.path, w.Code, w.Body, tc.want)
		}
	}
	if got[0] != id+" /a/b" {
		t.Errorf("the feature got %q, want the session and the rest of the path", got[0])
	}
	for _, p := range []string{"/sessions/" + id + "/egress", "/sessions/" + id + "/other", "/sessions/" + id, "/sessions//probe"} {
		if rt.Match(httptest.NewRequest(http.MethodGet, p, nil)) {
			t.Errorf("%s matches, want it left to other routes", p)
		}
	}
}

func TestSandboxedBeforeAnyPromptAndAfterTheEnd(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	ss := b.srv.live.lookup(c.hello["session_id"].(string))
	info, err := ss.sandboxed()
	if err != nil {
		t.Fatalf("sandboxed before any prompt: %v", err)
	}
	if st, err := os.Stat(info.Dirs.Work); err != nil || !st.IsDir() {
		t.Fatalf("the work directory %s: %v", info.Dirs.Work, err)
	}
	again, err := ss.sandboxed()
	if err != nil || again != info {
		t.Fatalf("sandboxed again = %p, %v; want the same %p", again, err, info)
	}
	c.prompt("p1", "echo hi")
	c.finish("p1")
	ss.end(errClosed)
	if _, err := ss.sandboxed(); !errors.Is(err, errSessionEnded) {
		t.Fatalf("sandboxed after the end = %v, want errSessionEnded", err)
	}
	if _, err := os.Stat(info.Dirs.Work); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the work directory outlived the session: %v", err)
	}
}
