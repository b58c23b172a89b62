package kit

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/protocol"
)

// inspectLogin logs in to the inspector with bearer and returns the
// headers the page's requests carry (its cookie and the CSRF header) and
// what the login said about terminals.
func (b *box) inspectLogin(bearerValue string) (http.Header, bool) {
	b.t.Helper()
	h := bearer(bearerValue)
	h.Set(inspect.Header, "1")
	resp, body := b.post("/inspect/api/login", h, "")
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		b.t.Fatalf("login = %d %s, want 200 and a cookie", resp.StatusCode, body)
	}
	var ans struct {
		Terminals bool `json:"terminals"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		b.t.Fatalf("login answered %s: %v", body, err)
	}
	ck := resp.Cookies()[0]
	return http.Header{"Cookie": {ck.Name + "=" + ck.Value}, inspect.Header: {"1"}}, ans.Terminals
}

// withOrigin is page's headers with origin.
func withOrigin(page http.Header, origin string) http.Header {
	h := page.Clone()
	if origin != "" {
		h.Set("Origin", origin)
	}
	return h
}

// dialStatus tries a WebSocket handshake and returns its HTTP status
// (101 when it upgraded; the connection is closed again).
func (b *box) dialStatus(path string, header http.Header) int {
	b.t.Helper()
	c, resp, err := wsconn.Dial(testkit.Context(b.t, "a handshake"), "ws"+strings.TrimPrefix(b.url, "http")+path, wsconn.DialOptions{Header: header})
	if err == nil {
		c.Close()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		b.t.Fatalf("dial %s: %v", path, err)
	}
	return resp.StatusCode
}

// The inspector opens terminals only for a login that may have a shell:
// the key, or a token with the exec scope besides inspect. An inspect
// token alone reads sessions and never gets one; the WebSocket attaches
// only from the page's own origin; a terminal is reached only through its
// own session, and only while the session lives.
func TestInspectorTerminalAuth(t *testing.T) {
	b := newBox(t, scripted(nil), withInspector)
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	base := "/inspect/api/sessions/" + id + "/terminals"
	const shell = `{"command":["/bin/sh"],"env":{"PS1":"$ "}}`

	t.Run("inspect token: no terminal", func(t *testing.T) {
		tok := b.token(protocol.ScopeInspect)
		page, may := b.inspectLogin(tok)
		if may {
			t.Error("login with an inspect token said terminals: true")
		}
		if code, out := b.call("POST", base, page, shell); code != http.StatusForbidden || !strings.Contains(string(out), protocol.ScopeExec) {
			t.Errorf("POST terminals with an inspect token's cookie = %d %s, want 403 naming the exec scope", code, out)
		}
		if code, _ := b.call("GET", base, page, ""); code != http.StatusForbidden {
			t.Errorf("GET terminals with an inspect token's cookie = %d, want 403", code)
		}
		direct := bearer(tok)
		direct.Set(inspect.Header, "1")
		if code, _ := b.call("POST", base, direct, shell); code != http.StatusForbidden {
			t.Errorf("POST terminals with an inspect token as bearer = %d, want 403", code)
		}
		// A terminal someone else opened: no attaching either.
		var ti protocol.Terminal
		b.doJSON("POST", "/sessions/"+id+"/terminals", shell, http.StatusCreated, &ti)
		if code := b.dialStatus(base+"/"+ti.ID, withOrigin(page, b.url)); code != http.StatusForbidden {
			t.Errorf("attaching with an inspect token's cookie = %d, want 403", code)
		}
		if code, _ := b.call("DELETE", base+"/"+ti.ID, page, ""); code != http.StatusForbidden {
			t.Errorf("DELETE with an inspect token's cookie = %d, want 403", code)
		}
		b.doJSON("DELETE", "/sessions/"+id+"/terminals/"+ti.ID, "", http.StatusNoContent, nil)
		// The token still reads the session.
		if code, _ := b.call("GET", "/inspect/api/sessions", page, ""); code != http.StatusOK {
			t.Errorf("GET sessions with the inspect token's cookie = %d, want 200", code)
		}
	})

	t.Run("exec token without inspect: no login", func(t *testing.T) {
		h := bearer(b.token(protocol.ScopeExec))
		h.Set(inspect.Header, "1")
		if resp, _ := b.post("/inspect/api/login", h, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("login with an exec token = %d, want 401", resp.StatusCode)
		}
	})

	for _, cred := range []struct{ name, bearer string }{
		{"key", b.key},
		{"exec and inspect token", b.token(protocol.ScopeInspect, protocol.ScopeExec)},
	} {
		t.Run(cred.name, func(t *testing.T) {
			page, may := b.inspectLogin(cred.bearer)
			if !may {
				t.Errorf("login with the %s said terminals: false", cred.name)
			}
			if code, _ := b.call("POST", base, http.Header{inspect.Header: {"1"}}, shell); code != http.StatusUnauthorized {
				t.Errorf("POST terminals without the cookie = %d, want 401", code)
			}
			noCSRF := page.Clone()
			noCSRF.Del(inspect.Header)
			if code, _ := b.call("POST", base, noCSRF, shell); code != http.StatusForbidden {
				t.Errorf("POST terminals without %s = %d, want 403", inspect.Header, code)
			}
			code, out := b.call("POST", base, page, shell)
			var ti protocol.Terminal
			if code != http.StatusCreated || json.Unmarshal(out, &ti) != nil || ti.ID == "" {
				t.Fatalf("POST terminals = %d %s, want 201 and a terminal", code, out)
			}
			for _, origin := range []string{"", "http://evil.example", "http://127.0.0.1:1", "null"} {
				if code := b.dialStatus(base+"/"+ti.ID, withOrigin(page, origin)); code != http.StatusForbidden {
					t.Errorf("attaching with Origin %q = %d, want 403", origin, code)
				}
			}
			tm := b.attach(base+"/"+ti.ID, withOrigin(page, b.url))
			tm.send("echo hi-$((40+2))\r")
			tm.until("hi-42")
			// The session's shell, in its work directory, as kit/terminal.go
			// starts it.
			info, err := b.srv.live.lookup(id).sandboxed()
			if err != nil {
				t.Fatal(err)
			}
			tm.send("pwd\r")
			tm.until(info.Dirs.Work)
			tm.control(protocol.TermControl{Type: protocol.TermResize, Cols: 120, Rows: 40})
			tm.send("stty size\r")
			tm.until("40 120")
			if code, _ := b.call("GET", base+"/"+ti.ID, page, ""); code != http.StatusOK {
				t.Errorf("GET the terminal = %d, want 200", code)
			}
			if code, out := b.call("DELETE", base+"/"+ti.ID, page, ""); code != http.StatusNoContent {
				t.Errorf("DELETE the terminal = %d %s, want 204", code, out)
			}
			testkit.Wait(t, tm.closed, "the deleted terminal's socket to close")
		})
	}

	t.Run("another session", func(t *testing.T) {
		page, _ := b.inspectLogin(b.key)
		c2 := b.dial("/", nil)
		other := c2.hello["session_id"].(string)
		var ti protocol.Terminal
		b.doJSON("POST", "/sessions/"+id+"/terminals", shell, http.StatusCreated, &ti)
		if code := b.dialStatus("/inspect/api/sessions/"+other+"/terminals/"+ti.ID, withOrigin(page, b.url)); code != http.StatusNotFound {
			t.Errorf("attaching session %s's terminal through session %s = %d, want 404", id, other, code)
		}
		if code, _ := b.call("DELETE", "/inspect/api/sessions/"+other+"/terminals/"+ti.ID, page, ""); code != http.StatusNotFound {
			t.Errorf("DELETE of another session's terminal = %d, want 404", code)
		}
		if code, _ := b.call("POST", "/inspect/api/sessions/s-nosuch/terminals", page, shell); code != http.StatusNotFound {
			t.Errorf("POST terminals of no session = %d, want 404", code)
		}
		b.doJSON("DELETE", "/sessions/"+id+"/terminals/"+ti.ID, "", http.StatusNoContent, nil)
	})

	t.Run("ended session", func(t *testing.T) {
		page, _ := b.inspectLogin(b.key)
		c3 := b.dial("/", nil)
		sid := c3.hello["session_id"].(string)
		p := "/inspect/api/sessions/" + sid + "/terminals"
		code, out := b.call("POST", p, page, `{"command":["/bin/sh","-c","exec sleep 1000"]}`)
		var ti protocol.Terminal
		if code != http.StatusCreated || json.Unmarshal(out, &ti) != nil {
			t.Fatalf("POST terminals = %d %s, want 201", code, out)
		}
		tm := b.attach(p+"/"+ti.ID, withOrigin(page, b.url))
		b.srv.live.lookup(sid).end(errClosed)
		testkit.Wait(t, tm.closed, "the terminal's socket to close with its session")
		testkit.Until(t, "the terminal's command to end with its session", func() bool { return !alive(ti.Pid) })
		if code, _ := b.call("POST", p, page, shell); code != http.StatusNotFound && code != http.StatusGone {
			t.Errorf("POST terminals of an ended session = %d, want 404 or 410", code)
		}
		if code := b.dialStatus(p+"/"+ti.ID, withOrigin(page, b.url)); code != http.StatusNotFound && code != http.StatusGone {
			t.Errorf("attaching a terminal of an ended session = %d, want 404 or 410", code)
		}
	})
}
