package kit

import (
	"net/http"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

func withCORS(origins ...string) boxOpt {
	return func(m *protocol.Manifest, _ *Options) { m.HTTP = &protocol.HTTPSpec{CORSOrigins: origins} }
}

func preflight(origin, method, headers string) http.Header {
	h := http.Header{"Origin": {origin}, "Access-Control-Request-Method": {method}}
	if headers != "" {
		h.Set("Access-Control-Request-Headers", headers)
	}
	return h
}

// TestCORS checks [http] cors_origins: an allowed origin's preflight is
// answered with what the routes take, its answers are marked readable by
// it, and any other origin, or any origin at /inspect, gets nothing a
// browser would let its page read.
func TestCORS(t *testing.T) {
	const app = "https://app.example.com"
	b := newBox(t, scripted(nil), withCORS(app, "http://localhost:3000"))

	resp, raw := b.do(http.MethodOptions, "/files/abc", preflight(app, "GET", "authorization"), nil)
	body := string(raw)
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "PATCH") || h.Get("Access-Control-Max-Age") == "" {
		t.Errorf("preflight from %s = %d %v %q, want 204 allowing the origin, Authorization and the routes' methods", app, resp.StatusCode, h, body)
	}
	if h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight allows credentials (%q): the routes take no cookies", h.Get("Access-Control-Allow-Credentials"))
	}
	resp, raw = b.do(http.MethodOptions, "/uploads/x", preflight(app, "PATCH", "Authorization, Upload-Offset, Content-Type"), nil)
	body = string(raw)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("upload preflight = %d %q, want 204", resp.StatusCode, body)
	}

	resp, raw = b.do(http.MethodGet, "/environment", http.Header{"Origin": {app}, "Authorization": {"Bearer " + b.key}}, nil)
	body = string(raw)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Upload-Offset") || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Errorf("GET /environment from %s = %d %v, want 200 readable by the origin", app, resp.StatusCode, resp.Header)
	}
	if !strings.Contains(body, `"name"`) {
		t.Errorf("GET /environment body = %q", body)
	}

	for _, tc := range []struct{ what, origin, path, method, headers, want string }{
		{"another origin", "https://evil.example", "/files/abc", "GET", "authorization", "add it to cors_origins under [http]"},
		{"a look-alike origin", "https://app.example.com.evil.example", "/environment", "GET", "", "add it to cors_origins"},
		{"the inspector", app, "/inspect/api/sessions", "GET", "", "the inspector answers its own origin only"},
		{"a header the routes do not take", app, "/files/abc", "GET", "authorization, x-evil", `the header "x-evil"`},
	} {
		resp, raw := b.do(http.MethodOptions, tc.path, preflight(tc.origin, tc.method, tc.headers), nil)
		body := string(raw)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(body, tc.want) {
			t.Errorf("%s: preflight = %d %v %q, want 403 without Access-Control-Allow-Origin, saying %q", tc.what, resp.StatusCode, resp.Header, body, tc.want)
		}
	}
	// A simple request from another origin is served (it may be a plain
	// link) but not marked readable by that origin's page.
	resp, _ = b.do(http.MethodGet, "/health", http.Header{"Origin": {"https://evil.example"}}, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET /health from another origin = %d %v, want 200 without Access-Control-Allow-Origin", resp.StatusCode, resp.Header)
	}
}

// TestCORSAnyAndNone checks "*" (every origin, answered with "*") and the
// default, no entry: no page of another origin may read anything, as v1.
func TestCORSAnyAndNone(t *testing.T) {
	t.Run("any", func(t *testing.T) { testCORSAny(t) })
	t.Run("none", func(t *testing.T) { testCORSNone(t) })
}

func testCORSAny(t *testing.T) {
	anyBox := newBox(t, scripted(nil), withCORS("*"))
	resp, _ := anyBox.do(http.MethodOptions, "/environment", preflight("https://whoever.example", "GET", "authorization"), nil)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight with cors_origins [\"*\"] = %d %v, want 204 with Access-Control-Allow-Origin *", resp.StatusCode, resp.Header)
	}
	resp, _ = anyBox.do(http.MethodOptions, "/inspect", preflight("https://whoever.example", "GET", ""), nil)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("inspector preflight with cors_origins [\"*\"] = %d %v, want 403", resp.StatusCode, resp.Header)
	}
}

func testCORSNone(t *testing.T) {
	none := newBox(t, scripted(nil))
	resp, body := none.do(http.MethodOptions, "/environment", preflight("https://app.example.com", "GET", "authorization"), nil)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" || !strings.Contains(string(body), "cors_origins") {
		t.Errorf("preflight with no cors_origins = %d %v %q, want 403 naming cors_origins", resp.StatusCode, resp.Header, body)
	}
	resp, _ = none.do(http.MethodGet, "/environment", http.Header{"Origin": {"https://app.example.com"}, "Authorization": {"Bearer " + none.key}}, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET /environment with no cors_origins = %d %v, want 200 without Access-Control-Allow-Origin", resp.StatusCode, resp.Header)
	}
}
