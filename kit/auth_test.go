package kit

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestRouteAuth asks every authenticated route with no credential, a token
// with every scope but the ones the route takes, a token with one it takes,
// and the key. A refusal is the same everywhere: 401, WWW-Authenticate
// Bearer realm="glovebox", Content-Length 0 and no body.
func TestRouteAuth(t *testing.T) {
	b := newBox(t, scripted(nil), withInspector)
	const missingFile = "00000000-0000-4000-8000-000000000000" // a valid id of no file
	inspectPOST := http.Header{inspect.Header: {"1"}}
	routes := []struct {
		method, path string
		header       http.Header // sent with every attempt
		body         string
		scopes       []string // the scopes the route takes
		want         int      // with the key or a token of one of scopes
	}{
		{"GET", "/environment", nil, "", []string{protocol.ScopeEnvironment}, http.StatusOK},
		{"HEAD", "/environment", nil, "", []string{protocol.ScopeEnvironment}, http.StatusOK},
		{"GET", "/metrics", nil, "", []string{protocol.ScopeMetrics}, http.StatusOK},
		{"GET", "/sessions", nil, "", []string{protocol.ScopeAdmin}, http.StatusOK},
		{"GET", "/logs", nil, "", []string{protocol.ScopeLogs, protocol.ScopeAdmin}, http.StatusOK},
		{"GET", "/egress", nil, "", []string{protocol.ScopeAdmin}, http.StatusOK},
		{"GET", "/files", nil, "", []string{protocol.ScopeAdmin, protocol.ScopeFiles}, http.StatusOK},
		{"DELETE", "/files/" + missingFile, nil, "", []string{protocol.ScopeAdmin, protocol.ScopeFiles}, http.StatusNotFound},
		{"GET", "/files/" + missingFile, nil, "", []string{protocol.ScopeFiles}, http.StatusNotFound},
		{"PUT", "/uploads/auth.txt", nil, "hello", []string{protocol.ScopeUpload}, http.StatusCreated},
		{"GET", "/inspect/api/sessions", nil, "", []string{protocol.ScopeInspect}, http.StatusOK},
		{"POST", "/inspect/api/login", inspectPOST, "", []string{protocol.ScopeInspect}, http.StatusOK},
		{"GET", "/", nil, "", []string{protocol.ScopeConnect}, http.StatusSwitchingProtocols}, // the WebSocket
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			var others []string
			for _, s := range protocol.Scopes {
				if !slices.Contains(rt.scopes, s) {
					others = append(others, s)
				}
			}
			creds := []struct {
				name   string
				bearer string
				want   int
			}{
				{"no credential", "", http.StatusUnauthorized},
				{"token of every other scope", b.token(others...), http.StatusUnauthorized},
				{"token of another key", mintWith(t, protocol.NewKey(), rt.scopes...), http.StatusUnauthorized},
				{"key", b.key, rt.want},
			}
			for _, s := range rt.scopes {
				creds = append(creds, struct {
					name   string
					bearer string
					want   int
				}{"token of scope " + s, b.token(s), rt.want})
			}
			for _, c := range creds {
				h := http.Header{}
				for k, v := range rt.header {
					h[k] = v
				}
				if c.bearer != "" {
					h.Set("Authorization", "Bearer "+c.bearer)
				}
				var (
					status int
					got    http.Header
					body   []byte
				)
				if rt.path == "/" {
					status, got = upgradeStatus(t, b, h)
				} else {
					var resp *http.Response
					resp, body = b.do(rt.method, rt.path, h, []byte(rt.body))
					status, got = resp.StatusCode, resp.Header
				}
				if status != c.want {
					t.Errorf("%s %s with %s = %d, want %d", rt.method, rt.path, c.name, status, c.want)
				}
				if status != http.StatusUnauthorized {
					continue
				}
				if v := got.Get("WWW-Authenticate"); v != `Bearer realm="glovebox"` {
					t.Errorf("%s %s with %s: WWW-Authenticate = %q, want %q", rt.method, rt.path, c.name, v, `Bearer realm="glovebox"`)
				}
				if v := got.Get("Content-Length"); v != "0" {
					t.Errorf("%s %s with %s: Content-Length = %q, want 0", rt.method, rt.path, c.name, v)
				}
				if len(body) != 0 {
					t.Errorf("%s %s with %s: body %q, want none", rt.method, rt.path, c.name, body)
				}
			}
		})
	}
}

// mintWith mints a token of key with scopes, valid for an hour.
func mintWith(t *testing.T, key string, scopes ...string) string {
	t.Helper()
	tok, err := protocol.MintToken(key, protocol.TokenClaims{Scopes: scopes, Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatalf("MintToken: %v", err)
	}
	return tok
}

// upgradeStatus opens a WebSocket on / with h and returns the handshake's
// status (101 when it succeeded) and response headers.
func upgradeStatus(t *testing.T, b *box, h http.Header) (int, http.Header) {
	t.Helper()
	c, resp, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+"/", wsconn.DialOptions{Header: h})
	if err == nil {
		c.WriteClose(wsconn.CloseNormal, "", time.Now().Add(time.Second))
		c.Close()
		return http.StatusSwitchingProtocols, nil
	}
	if resp == nil {
		t.Fatalf("dial /: %v", err)
	}
	return resp.StatusCode, resp.Header
}
