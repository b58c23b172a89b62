package kit

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// tokenBox is a box with a settable clock and two files in its store.
type tokenBox struct {
	*box
	mu       sync.Mutex
	now      time.Time
	f1, f2   string // /files ids
	helloCap []any
}

func newTokenBox(t *testing.T) *tokenBox {
	tb := &tokenBox{now: time.Unix(1_800_000_000, 0)}
	clock := func() time.Time { tb.mu.Lock(); defer tb.mu.Unlock(); return tb.now }
	tb.box = newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.Now = clock })
	c := tb.dial("/", nil)
	tb.helloCap, _ = c.hello["capabilities"].([]any)
	c.prompt("1", "write one.bin 2000000")
	tb.f1 = outputsOf(t, last(c.finish("1")))["one.bin"]["id"].(string)
	c.prompt("2", "write two.bin 2000000")
	tb.f2 = outputsOf(t, last(c.finish("2")))["two.bin"]["id"].(string)
	c.close()
	return tb
}

func (tb *tokenBox) advance(d time.Duration) {
	tb.mu.Lock()
	tb.now = tb.now.Add(d)
	tb.mu.Unlock()
}

func (tb *tokenBox) mint(t *testing.T, key string, ttl time.Duration, files []string, scopes ...string) string {
	t.Helper()
	tb.mu.Lock()
	exp := tb.now.Add(ttl)
	tb.mu.Unlock()
	tok, err := protocol.MintToken(key, protocol.TokenClaims{Scopes: scopes, Expires: exp, Files: files})
	if err != nil {
		t.Fatalf("MintToken: %v", err)
	}
	return tok
}

// status returns the status of GET path with the bearer in the
// Authorization header (none when bearer is empty); a 401 must have an
// empty body.
func (tb *tokenBox) status(t *testing.T, path, bearer string) int {
	t.Helper()
	var h http.Header
	if bearer != "" {
		h = http.Header{"Authorization": {"Bearer " + bearer}}
	}
	resp, body := tb.get(path, h)
	if resp.StatusCode == 401 && len(body) != 0 {
		t.Errorf("GET %s: 401 with body %q, want it empty", path, body)
	}
	return resp.StatusCode
}

// upgrade opens a WebSocket on path with opts and returns the status of
// the handshake (101 when it succeeded).
func (tb *tokenBox) upgrade(t *testing.T, path string, opts wsconn.DialOptions) int {
	t.Helper()
	c, resp, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(tb.url, "http")+path, opts)
	if err == nil {
		c.WriteClose(wsconn.CloseNormal, "", time.Now().Add(time.Second))
		c.Close()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	return resp.StatusCode
}

func bearerOpts(tok string) wsconn.DialOptions {
	return wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + tok}}}
}

func subprotocolOpts(tok string) wsconn.DialOptions {
	return wsconn.DialOptions{Subprotocols: []string{SubprotocolV1, SubprotocolBearerPrefix + tok}}
}

func TestTokenScopes(t *testing.T) {
	tb := newTokenBox(t)
	for _, tc := range []struct {
		name   string
		scopes []string
		files  []string
		// want: /environment, /files/f1, /files/f2, WebSocket (header),
		// WebSocket (subprotocol)
		want [5]int
	}{
		{"connect", []string{"connect"}, nil, [5]int{401, 401, 401, 101, 101}},
		{"files", []string{"files"}, nil, [5]int{401, 200, 200, 401, 401}},
		{"files limited", []string{"files"}, []string{"f_nothing", "FILE1"}, [5]int{401, 200, 401, 401, 401}},
		{"environment", []string{"environment"}, nil, [5]int{200, 401, 401, 401, 401}},
		{"all", protocol.Scopes, nil, [5]int{200, 200, 200, 101, 101}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, f := range tc.files {
				if f == "FILE1" {
					tc.files[i] = tb.f1
				}
			}
			tok := tb.mint(t, tb.key, 15*time.Minute, tc.files, tc.scopes...)
			got := [5]int{
				tb.status(t, "/environment", tok),
				tb.status(t, "/files/"+tb.f1, tok),
				tb.status(t, "/files/"+tb.f2, tok),
				tb.upgrade(t, "/", bearerOpts(tok)),
				tb.upgrade(t, "/", subprotocolOpts(tok)),
			}
			if got != tc.want {
				t.Errorf("token %v files %v: env, f1, f2, ws, ws subprotocol = %v, want %v", tc.scopes, tc.files, got, tc.want)
			}
		})
	}
}

func TestTokenRefused(t *testing.T) {
	tb := newTokenBox(t)
	all := tb.mint(t, tb.key, time.Minute, nil, protocol.Scopes...)
	foreign := tb.mint(t, protocol.NewKey(), time.Minute, nil, protocol.Scopes...)
	past := tb.mint(t, tb.key, -time.Second, nil, protocol.Scopes...)
	check := func(t *testing.T, name, tok string, want int, wantWS int) {
		t.Helper()
		env, f1 := tb.status(t, "/environment", tok), tb.status(t, "/files/"+tb.f1, tok)
		ws, sub := tb.upgrade(t, "/", bearerOpts(tok)), tb.upgrade(t, "/", subprotocolOpts(tok))
		if env != want || f1 != want || ws != wantWS || sub != wantWS {
			t.Errorf("%s: env, files, ws, ws subprotocol = %d %d %d %d, want %d %d %d %d", name, env, f1, ws, sub, want, want, wantWS, wantWS)
		}
	}
	check(t, "another key's token", foreign, 401, 401)
	check(t, "token minted expired", past, 401, 401)
	check(t, "live token", all, 200, 101)
	check(t, "token with a changed byte", all[:len(all)-1]+string(all[len(all)-1]^1), 401, 401)

	tb.advance(59 * time.Second)
	check(t, "token a second before expiry", all, 200, 101)
	tb.advance(time.Second)
	check(t, "token at its expiry", all, 401, 401)
	check(t, "key after the token expired", tb.key, 200, 101)
}

func TestTokenQuery(t *testing.T) {
	tb := newTokenBox(t)
	files := tb.mint(t, tb.key, time.Minute, nil, protocol.ScopeFiles)
	one := tb.mint(t, tb.key, time.Minute, []string{tb.f1}, protocol.ScopeFiles)
	all := tb.mint(t, tb.key, time.Minute, nil, protocol.Scopes...)
	connect := tb.mint(t, tb.key, time.Minute, nil, protocol.ScopeConnect)
	for _, tc := range []struct {
		name, path string
		want       int
	}{
		{"files token", "/files/" + tb.f1 + "?token=" + files, 200},
		{"files token, another file", "/files/" + tb.f2 + "?token=" + files, 200},
		{"token limited to the file", "/files/" + tb.f1 + "?token=" + one, 200},
		{"token limited to another file", "/files/" + tb.f2 + "?token=" + one, 401},
		{"connect token", "/files/" + tb.f1 + "?token=" + connect, 401},
		{"the key", "/files/" + tb.f1 + "?token=" + tb.key, 401},
		{"empty", "/files/" + tb.f1 + "?token=", 401},
		{"environment", "/environment?token=" + all, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tb.status(t, tc.path, ""); got != tc.want {
				t.Errorf("GET %s = %d, want %d", tc.path, got, tc.want)
			}
		})
	}
	if got := tb.upgrade(t, "/?token="+all, wsconn.DialOptions{}); got != 401 {
		t.Errorf("WebSocket with ?token= = %d, want 401", got)
	}
	// The header wins over the query: a bad header is not rescued.
	resp, _ := tb.get("/files/"+tb.f1+"?token="+files, http.Header{"Authorization": {"Bearer wrong"}})
	if resp.StatusCode != 401 {
		t.Errorf("bad header with a good ?token= = %d, want 401", resp.StatusCode)
	}
	// Expiry applies to the query form too.
	tb.advance(time.Minute)
	if got := tb.status(t, "/files/"+tb.f1+"?token="+files, ""); got != 401 {
		t.Errorf("expired ?token= = %d, want 401", got)
	}
}

func TestTokenCapability(t *testing.T) {
	tb := newTokenBox(t)
	if !slices.Contains(tb.helloCap, any(protocol.CapTokens)) {
		t.Errorf("hello capabilities = %v, want %q among them", tb.helloCap, protocol.CapTokens)
	}
	_, body := tb.get("/environment", tb.auth())
	if !strings.Contains(string(body), `"`+protocol.CapTokens+`"`) {
		t.Errorf("/environment = %s, want capability %q", body, protocol.CapTokens)
	}
}

// A connect token carries a whole session: prompts run on it.
func TestTokenSession(t *testing.T) {
	tb := newTokenBox(t)
	tok := tb.mint(t, tb.key, time.Minute, nil, protocol.ScopeConnect)
	c := tb.dial("/", http.Header{"Authorization": {"Bearer " + tok}})
	c.prompt("p", "echo hi")
	if m := last(c.finish("p")); m["type"] != "complete" {
		t.Errorf("prompt over a token's session: %v", m)
	}
}
