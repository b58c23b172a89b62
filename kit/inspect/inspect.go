// Package inspect is the box's inspector: a small page at /inspect
// (static HTML, JavaScript and CSS with no build step, embedded in the kit
// binary) and the JSON and event-stream routes under /inspect/api/ it
// reads. It is off unless the manifest's inspect.enabled or the kit's
// Options.Inspect turns it on; when off, every /inspect path is 404.
//
// Auth. The page itself is static and holds no secret. Its API takes the
// key or a token with the "inspect" scope, in an Authorization header, or
// a cookie that POST /inspect/api/login sets in exchange for one: the page
// reads a token from its URL fragment (never sent to a server, so never in
// a log), drops the fragment from the address bar and history, and logs
// in. The cookie is random, HttpOnly, SameSite=Strict, scoped to /inspect,
// Secure over https, and lives no longer than the token (at most
// eight hours). Requests that change something (login, logout, slot
// answers, aborts, terminals started or killed: every method but GET and
// HEAD) must also carry the header X-Glovebox-Inspect, which a cross-site
// form cannot send.
//
// Terminals. The page opens interactive terminals into live sessions (a
// shell in the session's sandbox, drawn by the vendored xterm.js under
// static/vendor/xterm) through the box's own terminals (Options.Terminals,
// the same code as /sessions/{id}/terminals). Reading sessions is not a
// shell: the cookie keeps the Grant of the credential it was exchanged
// for, and only a Grant with Terminals (the key, or a token with the exec
// or admin scope besides inspect) reaches these routes; others get 403.
// The WebSocket that attaches a terminal is a GET the cookie rides on, so
// its Origin must name this box's host (a page of another port on the
// same host is the same site, and would carry the cookie too).
//
// What it keeps. Live sessions' recent frames (the kit keeps them); ended
// sessions and their prompts (status, times, exit status, the limit that
// stopped one, its outputs), in a bounded history persisted under the
// state dir (history.go); samples of each session's cgroup while it runs
// (the kit takes them). The page reads the egress audit trail through its
// own route, so an inspect token sees each session's connections.
//
//	GET  /inspect/                          the page (index.html, app.js, app.css)
//	POST /inspect/api/login                 bearer -> cookie
//	POST /inspect/api/logout                forget the cookie
//	GET  /inspect/api/sessions              live sessions and their prompts (JSON), and whether this login opens terminals
//	GET  /inspect/api/sessions/{id}/events  the session's frames (text/event-stream)
//	POST /inspect/api/sessions/{id}/slots/{slot}  {"value":...} or {"reject":"why"}
//	POST /inspect/api/sessions/{id}/prompts/{prompt}/abort  abort it, as the client's abort message
//	GET  /inspect/api/files/{id}            an output from the box's store
//	GET  /inspect/api/history               ended sessions and their prompts (history.go)
//	GET  /inspect/api/egress?session=&since=  the egress audit trail's lines, as GET /egress/log
//	GET  /inspect/api/environment           what GET /environment says
//	GET  /inspect/api/snapshots             what GET /snapshots says
//	POST|GET /inspect/api/sessions/{id}/terminals       start a terminal in the session, or list them (key or inspect+exec)
//	GET|DELETE /inspect/api/sessions/{id}/terminals/{tid}  attach (WebSocket, same origin only), describe, or kill it
package inspect

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/route"
)

//go:embed static
var static embed.FS

// Static returns the page's files: index.html, app.css and its scripts
// (app.js last, after format.js, terminal.js, session.js, shell.js and
// box.js), and under vendor/xterm the terminal emulator shell.js draws
// with (xterm.js, MIT; its README says which version).
func Static() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// Prefix is the inspector's path.
const Prefix = "/inspect"

// IsPath reports whether p is the inspector's: /inspect or under it.
func IsPath(p string) bool {
	return p == Prefix || strings.HasPrefix(p, Prefix+"/")
}

const (
	cookieName = "glovebox_inspect"
	cookieTTL  = 8 * time.Hour
	maxCookies = 256
	// Header must come with every request that changes something.
	Header = "X-Glovebox-Inspect"
	// csp allows the page its own scripts, styles and API, and
	// nothing else: no inline script, no other origin, no framing.
	csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	// heartbeat keeps an idle event stream open through proxies.
	heartbeat = 15 * time.Second
)

// Session is a live session as the inspector sees it.
type Session interface {
	// Row describes it for GET /inspect/api/sessions.
	Row() SessionRow
	// Prompts are its prompts, ended ones included, oldest first.
	Prompts() []PromptInfo
	// Subscribe returns its recent frames and a channel of those to come,
	// closed when the session ends or the reader falls behind, and stop,
	// which ends the subscription; ok is false when the session has ended
	// or has too many readers.
	Subscribe() (past [][]byte, frames <-chan []byte, stop func(), ok bool)
	// Ended reports whether the session has ended.
	Ended() bool
	// Answer resolves a display slot with value, or rejects it when
	// reject is not nil, as the session's client would; false when no
	// slot of that id waits for an answer.
	Answer(slot string, value json.RawMessage, reject *string) bool
	// Abort aborts a running or queued prompt, as the client's abort
	// message does; false when it is neither.
	Abort(prompt string) bool
}

// Sessions are the box's live sessions.
type Sessions interface {
	All() []Session
	// Lookup returns the session of id, nil when there is none.
	Lookup(id string) Session
}

// SessionRow is one row of GET /inspect/api/sessions.
type SessionRow struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"` // key, subject NAME, or token
	Started   time.Time `json:"started"`
	Connected bool      `json:"connected"`
	// Paused: detached, its processes frozen (sessions.pause).
	Paused bool `json:"paused,omitempty"`
	// Persistent: it outlives the kit (sessions.persist).
	Persistent bool         `json:"persistent,omitempty"`
	LastSeq    uint64       `json:"last_seq"`
	Prompts    []PromptInfo `json:"prompts"`
	// Resources are the samples of its cgroup, oldest first; none when
	// its processes run in no cgroup.
	Resources []ResourceSample `json:"resources,omitempty"`
}

// Grant is what a credential allows the page, recorded with its cookie
// at login.
type Grant struct {
	// Ends is when the grant ends: a token's expiry; zero for the key,
	// whose grant the cookie's lifetime bounds.
	Ends time.Time
	// Terminals: it may open terminals in sessions, a shell as the
	// session (the key, or a token that carries the exec or admin scope
	// besides inspect). An inspect token alone reads sessions and answers
	// their slots; it never becomes a shell.
	Terminals bool
}

// Terminals opens terminals in live sessions for the page, as the box's
// own /sessions/{id}/terminals does.
type Terminals interface {
	// ServeTerminals answers r as /sessions/{session}/terminals{rest}
	// (rest "" or "/{tid}"): create, list, attach (a WebSocket upgrade)
	// or kill; 404 when no live session has that id.
	ServeTerminals(w http.ResponseWriter, r *http.Request, session, rest string)
}

// Options are what the inspector reads of the box.
type Options struct {
	Sessions Sessions
	// Grant checks a bearer for the inspect scope (the key, or a token
	// that grants it) and returns what it allows.
	Grant func(bearer string) (g Grant, ok bool)
	// Terminals opens terminals in live sessions; nil: the page opens
	// none.
	Terminals Terminals
	// Files serves GET /files/{id} from the box's own store.
	Files http.Handler
	// Environment returns GET /environment's body.
	Environment func() []byte
	// Audit returns the egress audit trail's kept lines for q; nil when
	// the box has no egress proxy.
	Audit func(q egress.Query) ([][]byte, error)
	// Snapshots returns GET /snapshots's body; nil when the box has no
	// snapshot store.
	Snapshots func(ctx context.Context) ([]byte, error)
	Now       func() time.Time
	// Done ends the event streams when the box closes.
	Done <-chan struct{}
	// Dir keeps the history on disk; "" keeps it in memory.
	Dir string
	Log *slog.Logger
}

// Inspector holds the cookies handed out and the ended sessions'
// history; the live sessions hold the rest. A nil Inspector (the box
// serves none) answers 404 to every /inspect path.
type Inspector struct {
	o       Options
	static  fs.FS
	history *history // ended sessions (history.go)

	mu      sync.Mutex
	cookies map[[sha256.Size]byte]Grant // cookie hash -> its grant, expiry set
}

// New returns the inspector of a box.
func New(o Options) *Inspector {
	h, err := openHistory(o.Dir, o.Log)
	if err != nil {
		o.Log.Warn("inspector history: kept in memory only", "err", err)
	}
	return &Inspector{o: o, static: Static(), history: h, cookies: map[[sha256.Size]byte]Grant{}}
}

// Routes mounts the inspector's paths: /inspect and under it.
func (in *Inspector) Routes() []route.Route {
	return []route.Route{{Match: func(r *http.Request) bool { return IsPath(r.URL.Path) }, Serve: in.serve}}
}

// Record puts an ended session in the history; a nil Inspector keeps
// nothing.
func (in *Inspector) Record(rec SessionRecord) {
	if in == nil {
		return
	}
	in.history.add(rec)
}

func (in *Inspector) serve(w http.ResponseWriter, r *http.Request) {
	if in == nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	rest := strings.TrimPrefix(r.URL.Path, Prefix)
	if api, ok := strings.CutPrefix(rest, "/api/"); ok {
		in.serveAPI(w, r, api)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if rest == "" {
		http.Redirect(w, r, Prefix+"/", http.StatusFound)
		return
	}
	name := strings.TrimPrefix(rest, "/")
	if name == "" {
		name = "index.html"
	}
	data, err := fs.ReadFile(in.static, name)
	// The page's own files, and the vendored terminal emulator's.
	if err != nil || strings.Contains(name, "/") && !strings.HasPrefix(name, "vendor/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	case ".md", "", ".addon-fit":
		h.Set("Content-Type", "text/plain; charset=utf-8") // README, LICENSE
	default:
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodGet {
		w.Write(data)
	}
}

// bearerGrant checks a bearer for the inspect scope and returns its
// grant, with an end.
func (in *Inspector) bearerGrant(bearer string) (Grant, bool) {
	g, ok := in.o.Grant(bearer)
	if ok && g.Ends.IsZero() {
		g.Ends = in.o.Now().Add(cookieTTL)
	}
	return g, ok
}

// authorized accepts a bearer (key or inspect token) or a live
// inspector cookie, and returns what it allows.
func (in *Inspector) authorized(r *http.Request) (Grant, bool) {
	if bearer, ok := route.Bearer(r); ok {
		return in.bearerGrant(bearer)
	}
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return Grant{}, false
	}
	sum := sha256.Sum256([]byte(ck.Value))
	in.mu.Lock()
	defer in.mu.Unlock()
	g, ok := in.cookies[sum]
	if ok && !in.o.Now().Before(g.Ends) {
		delete(in.cookies, sum)
		return Grant{}, false
	}
	return g, ok
}
