// Package inspect is the box's inspector: a small page at /inspect
// (static HTML, JavaScript and CSS with no build step, embedded in the kit
// binary) and the JSON and event-stream routes under /inspect/api/ it
// reads. It is off
// unless the manifest's inspect.enabled or Options.Inspect turns it on;
// when off, every /inspect path is 404.
//
// Auth. The page itself is static and holds no secret. Its API takes the
// key or a token with the "inspect" scope, in an Authorization header, or
// a cookie that POST /inspect/api/login sets in exchange for one: the page
// reads a token from its URL fragment (never sent to a server, so never in
// a log), drops the fragment from the address bar and history, and logs
// in. The cookie is random, HttpOnly, SameSite=Strict, scoped to /inspect,
// Secure over https, and lives no longer than the token (at most
// eight hours). Requests that change something (login, logout, slot
// answers, aborts) must also carry the header X-Glovebox-Inspect, which a
// cross-site form cannot send.
//
// What it keeps. Live sessions' recent frames (the kit keeps them); ended
// sessions and their prompts (status, times, exit status, the limit that
// stopped one, its outputs), in a bounded history persisted under the
// state dir (history.go); samples of each session's cgroup while it runs
// (the kit takes them). The page reads the egress audit trail through its own
// route, so an inspect token sees each session's connections.
//
//	GET  /inspect/                          the page (index.html, app.js, app.css)
//	POST /inspect/api/login                 bearer -> cookie
//	POST /inspect/api/logout                forget the cookie
//	GET  /inspect/api/sessions              live sessions and their prompts (JSON)
//	GET  /inspect/api/sessions/{id}/events  the session's frames (text/event-stream)
//	POST /inspect/api/sessions/{id}/slots/{slot}  {"value":...} or {"reject":"why"}
//	POST /inspect/api/sessions/{id}/prompts/{prompt}/abort  abort it, as the client's abort message
//	GET  /inspect/api/files/{id}            an output from the box's store
//	GET  /inspect/api/history               ended sessions and their prompts (history.go)
//	GET  /inspect/api/egress?session=&since=  the egress audit trail's lines, as GET /egress/log
//	GET  /inspect/api/environment           what GET /environment says
package inspect

import (
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
)

//go:embed static
var static embed.FS

// Static returns the page's files: index.html, app.js, app.css.
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
	ID        string       `json:"id"`
	Owner     string       `json:"owner"` // key, subject NAME, or token
	Started   time.Time    `json:"started"`
	Connected bool         `json:"connected"`
	LastSeq   uint64       `json:"last_seq"`
	Prompts   []PromptInfo `json:"prompts"`
	// Resources are the samples of its cgroup, oldest first; none when
	// its processes run in no cgroup.
	Resources []ResourceSample `json:"resources,omitempty"`
}

// Options are what the inspector reads of the box.
type Options struct {
	Sessions Sessions
	// Grant checks a bearer for the inspect scope (the key, or a token
	// that grants it) and returns when its grant ends; zero for the
	// key, whose grant the cookie's lifetime bounds.
	Grant func(bearer string) (ends time.Time, ok bool)
	// Files serves GET /files/{id} from the box's own store.
	Files http.Handler
	// Environment returns GET /environment's body.
	Environment func() []byte
	// Audit returns the egress audit trail's kept lines for q; nil when
	// the box has no egress proxy.
	Audit func(q egress.Query) ([][]byte, error)
	Now   func() time.Time
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
	cookies map[[sha256.Size]byte]time.Time // cookie hash -> expiry
}

// New returns the inspector of a box.
func New(o Options) *Inspector {
	h, err := openHistory(o.Dir, o.Log)
	if err != nil {
		o.Log.Warn("inspector history: kept in memory only", "err", err)
	}
	return &Inspector{o: o, static: Static(), history: h, cookies: map[[sha256.Size]byte]time.Time{}}
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
		in.serveInspectAPI(w, r, api)
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
	if err != nil || strings.Contains(name, "/") {
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
	default:
		h.Set("Content-Type", "application/octet-stream")
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	if r.Method == http.MethodGet {
		w.Write(data)
	}
}

// inspectBearer checks a bearer for the inspect scope and returns when
// its grant ends.
func (in *Inspector) inspectBearer(bearer string) (time.Time, bool) {
	ends, ok := in.o.Grant(bearer)
	if ok && ends.IsZero() {
		ends = in.o.Now().Add(cookieTTL)
	}
	return ends, ok
}

// inspectAuthorized accepts a bearer (key or inspect token) or a live
// inspector cookie.
func (in *Inspector) inspectAuthorized(r *http.Request) bool {
	if bearer, ok := route.Bearer(r); ok {
		_, ok := in.inspectBearer(bearer)
		return ok
	}
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return false
	}
	sum := sha256.Sum256([]byte(ck.Value))
	in.mu.Lock()
	defer in.mu.Unlock()
	exp, ok := in.cookies[sum]
	if ok && !in.o.Now().Before(exp) {
		delete(in.cookies, sum)
		return false
	}
	return ok
}

func (in *Inspector) serveInspectAPI(w http.ResponseWriter, r *http.Request, api string) {
	if r.Method == http.MethodPost && r.Header.Get(Header) == "" {
		http.Error(w, "inspect: POST requests need the "+Header+" header", http.StatusForbidden)
		return
	}
	if api == "login" {
		in.inspectLogin(w, r)
		return
	}
	if api == "logout" {
		in.inspectLogout(w, r)
		return
	}
	if !in.inspectAuthorized(r) {
		route.Unauthorized(w)
		return
	}
	parts := strings.Split(api, "/")
	switch {
	case api == "sessions" && r.Method == http.MethodGet:
		in.inspectSessions(w)
	case api == "history" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"sessions": in.history.list()})
	case api == "egress" && r.Method == http.MethodGet:
		in.inspectEgress(w, r)
	case api == "environment" && r.Method == http.MethodGet:
		body := in.o.Environment()
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	case len(parts) == 2 && parts[0] == "files" && r.Method == http.MethodGet:
		if !storage.ValidID(parts[1]) {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/files/" + parts[1]
		r2.URL.RawQuery = "" // never ?consume: the inspector only looks
		w.Header().Set("Content-Disposition", "attachment")
		in.o.Files.ServeHTTP(w, r2)
	case len(parts) == 3 && parts[0] == "sessions" && parts[2] == "events" && r.Method == http.MethodGet:
		in.inspectEvents(w, r, parts[1])
	case len(parts) == 4 && parts[0] == "sessions" && parts[2] == "slots" && r.Method == http.MethodPost:
		in.inspectAnswer(w, r, parts[1], parts[3])
	case len(parts) == 5 && parts[0] == "sessions" && parts[2] == "prompts" && parts[4] == "abort" && r.Method == http.MethodPost:
		in.inspectAbort(w, r, parts[1], parts[3])
	default:
		http.NotFound(w, r)
	}
}

func (in *Inspector) inspectLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	bearer, ok := route.Bearer(r)
	if !ok {
		route.Unauthorized(w)
		return
	}
	exp, ok := in.inspectBearer(bearer)
	if !ok {
		route.Unauthorized(w)
		return
	}
	now := in.o.Now()
	if limit := now.Add(cookieTTL); exp.After(limit) {
		exp = limit
	}
	var b [32]byte
	rand.Read(b[:])
	val := base64.RawURLEncoding.EncodeToString(b[:])
	in.mu.Lock()
	for k, e := range in.cookies {
		if !now.Before(e) {
			delete(in.cookies, k)
		}
	}
	for len(in.cookies) >= maxCookies {
		var oldest [sha256.Size]byte
		var first time.Time
		for k, e := range in.cookies {
			if first.IsZero() || e.Before(first) {
				oldest, first = k, e
			}
		}
		delete(in.cookies, oldest)
	}
	in.cookies[sha256.Sum256([]byte(val))] = exp
	in.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: val, Path: Prefix,
		MaxAge:   int(exp.Sub(now) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"expires": exp.UTC().Format(time.RFC3339)})
}

func (in *Inspector) inspectLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		in.mu.Lock()
		delete(in.cookies, sha256.Sum256([]byte(ck.Value)))
		in.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func (in *Inspector) inspectSessions(w http.ResponseWriter) {
	list := in.o.Sessions.All()
	out := make([]SessionRow, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.Row())
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.After(out[j].Started)
		}
		return out[i].ID < out[j].ID
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"sessions": out})
}

// inspectEvents streams a session's frames as server-sent events: the
// recent ones kept, then each as it is sent, until the session ends, the
// observer falls too far behind (event "end" with data "dropped": the
// page reconnects) or the request ends.
func (in *Inspector) inspectEvents(w http.ResponseWriter, r *http.Request, id string) {
	ss := in.o.Sessions.Lookup(id)
	if ss == nil {
		http.NotFound(w, r)
		return
	}
	past, ch, stop, ok := ss.Subscribe()
	if !ok {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "inspect: the session has ended or has too many observers", http.StatusServiceUnavailable)
		return
	}
	defer stop()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	for _, f := range past {
		writeEvent(w, "frame", f)
	}
	if err := rc.Flush(); err != nil {
		return
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				why := "ended"
				if !ss.Ended() {
					why = "dropped"
				}
				writeEvent(w, "end", []byte(why))
				rc.Flush()
				return
			}
			writeEvent(w, "frame", f)
			// A burst goes out in one flush, not one per frame.
			for more := true; more; {
				select {
				case f, ok := <-ch:
					if !ok {
						more = false
						break
					}
					writeEvent(w, "frame", f)
				default:
					more = false
				}
			}
		case <-beat.C:
			io.WriteString(w, ": beat\n\n")
		case <-r.Context().Done():
			return
		case <-in.o.Done:
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// writeEvent writes one server-sent event; data is one line of JSON.
func writeEvent(w io.Writer, event string, data []byte) {
	io.WriteString(w, "event: "+event+"\ndata: ")
	w.Write(data)
	io.WriteString(w, "\n\n")
}

// inspectAnswer resolves or rejects a display slot from the page, as the
// session's client would.
func (in *Inspector) inspectAnswer(w http.ResponseWriter, r *http.Request, id, slotID string) {
	ss := in.o.Sessions.Lookup(id)
	if ss == nil {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Value  json.RawMessage `json:"value"`
		Reject *string         `json:"reject"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(&body); err != nil {
		http.Error(w, "inspect: want {\"value\": JSON} or {\"reject\": \"reason\"}: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body.Value) == 0 {
		body.Value = json.RawMessage("null")
	}
	if !ss.Answer(slotID, body.Value, body.Reject) {
		http.Error(w, "inspect: no display slot "+slotID+" waits for an answer on this session", http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// inspectAbort aborts a running or queued prompt from the page, as the
// session's client's abort message does: a running one is cancelled (its
// processes stopped), a queued one removed; the client gets the prompt's
// AbortError either way. 404 for a session or prompt the kit does not
// know, 409 for a prompt that has already ended.
func (in *Inspector) inspectAbort(w http.ResponseWriter, r *http.Request, id, promptID string) {
	ss := in.o.Sessions.Lookup(id)
	if ss == nil {
		http.Error(w, "inspect: no live session "+id, http.StatusNotFound)
		return
	}
	if ss.Abort(promptID) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	for _, p := range ss.Prompts() {
		if p.ID == promptID {
			http.Error(w, "inspect: prompt "+promptID+" has already ended ("+p.State+")", http.StatusConflict)
			return
		}
	}
	http.Error(w, "inspect: no prompt "+promptID+" on session "+id, http.StatusNotFound)
}

// inspectEgress answers the egress audit trail's kept lines as GET
// /egress/log does (since and session; never follow: the page polls), an
// empty answer when the box has no egress proxy.
func (in *Inspector) inspectEgress(w http.ResponseWriter, r *http.Request) {
	q, err := egress.ParseQuery(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, "inspect: egress: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if in.o.Audit == nil {
		return
	}
	q.Follow = false
	lines, err := in.o.Audit(q)
	if err != nil {
		http.Error(w, "inspect: egress: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	for _, line := range lines {
		if _, err := w.Write(line); err != nil {
			return
		}
	}
}
