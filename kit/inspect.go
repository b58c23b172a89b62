package kit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The inspector: a small page at /inspect (kit/inspect holds it) and the
// JSON and event-stream routes under /inspect/api/ it reads. It is off
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
// inspectCookieTTL). Requests that change something (login, logout, slot
// answers, aborts) must also carry the header X-Glovebox-Inspect, which a
// cross-site form cannot send.
//
// What it keeps. Live sessions' recent frames (observe.go); ended sessions
// and their prompts (status, times, exit status, the limit that stopped
// one, its outputs), in a bounded history persisted under the state dir
// (history.go); samples of each session's cgroup while it runs
// (resources.go). The page reads the egress audit trail through its own
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
const inspectPrefix = "/inspect"

// isInspectPath reports whether p is the inspector's: /inspect or under it.
func isInspectPath(p string) bool {
	return p == inspectPrefix || strings.HasPrefix(p, inspectPrefix+"/")
}

const (
	inspectCookie     = "glovebox_inspect"
	inspectCookieTTL  = 8 * time.Hour
	inspectMaxCookies = 256
	inspectHeader     = "X-Glovebox-Inspect"
	// inspectCSP allows the page its own scripts, styles and API, and
	// nothing else: no inline script, no other origin, no framing.
	inspectCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	// inspectHeartbeat keeps an idle event stream open through proxies.
	inspectHeartbeat = 15 * time.Second
)

// inspector holds the cookies handed out and the ended sessions'
// history; the live sessions hold the rest. A nil inspector (the box
// does not serve one) answers 404 to every /inspect path.
type inspector struct {
	static    fs.FS
	histBytes atomic.Int64 // every session's observer history (observe.go)
	history   *history     // ended sessions (history.go)

	auth        *auth
	live        *live
	local       *localStore   // outputs, for /inspect/api/files/{id}
	egress      *kitEgress    // nil: no proxy, no audit trail
	environment func() []byte // GET /environment's body
	now         func() time.Time
	done        <-chan struct{} // ends the event streams

	mu      sync.Mutex
	cookies map[[sha256.Size]byte]time.Time // cookie hash -> expiry
}

// newInspector returns the inspector, when the manifest's
// inspect.enabled or Options.Inspect turns it on, else nil. Its history
// is kept under stateDir when that is usable. The caller fills in what
// it reads of the box.
func newInspector(on bool, stateDir string, log *slog.Logger) *inspector {
	if !on {
		return nil
	}
	dir := ""
	if dirOK(stateDir) {
		dir = filepath.Join(stateDir, "inspect")
	}
	h, err := openHistory(dir, log)
	if err != nil {
		log.Warn("inspector history: kept in memory only", "err", err)
	}
	return &inspector{static: inspect.Static(), history: h, cookies: map[[sha256.Size]byte]time.Time{}}
}

func (in *inspector) routes() []route.Route {
	return []route.Route{{Match: func(r *http.Request) bool { return isInspectPath(r.URL.Path) }, Serve: in.serve}}
}

// recordSession puts an ended session in the inspector's history.
func (in *inspector) recordSession(ss *session, cause error) {
	if in == nil || !ss.opened.Load() {
		return
	}
	_, peaks := ss.obs.resources()
	in.history.add(sessionRecord{
		Peaks: peaks,
		ID:    ss.id, Owner: ownerLabel(ss.owner), Started: ss.obs.started.UTC(), Ended: time.Now().UTC(),
		Cause: closeCause(cause), Frames: ss.framesSent.Load(), Bytes: ss.bytesSent.Load(),
		Prompts: ss.obs.promptList(),
	})
}

// ownerLabel says whose a session is without naming a secret.
func ownerLabel(owner string) string {
	switch {
	case strings.HasPrefix(owner, "sub:"):
		return "subject " + strings.TrimPrefix(owner, "sub:")
	case strings.HasPrefix(owner, "token:"):
		return "token"
	}
	return owner
}

func (in *inspector) serve(w http.ResponseWriter, r *http.Request) {
	if in == nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", inspectCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	rest := strings.TrimPrefix(r.URL.Path, inspectPrefix)
	if api, ok := strings.CutPrefix(rest, "/api/"); ok {
		in.serveInspectAPI(w, r, api)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if rest == "" {
		http.Redirect(w, r, inspectPrefix+"/", http.StatusFound)
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
func (in *inspector) inspectBearer(bearer string) (time.Time, bool) {
	if in.auth.isKey(bearer) {
		return in.now().Add(inspectCookieTTL), true
	}
	c, ok := in.auth.tokenClaims(bearer)
	if !ok || !c.Allows(protocol.ScopeInspect) {
		return time.Time{}, false
	}
	return c.Expires, true
}

// inspectAuthorized accepts a bearer (key or inspect token) or a live
// inspector cookie.
func (in *inspector) inspectAuthorized(r *http.Request) bool {
	if bearer, ok := bearerHeader(r); ok {
		_, ok := in.inspectBearer(bearer)
		return ok
	}
	ck, err := r.Cookie(inspectCookie)
	if err != nil || ck.Value == "" {
		return false
	}
	sum := sha256.Sum256([]byte(ck.Value))
	in.mu.Lock()
	defer in.mu.Unlock()
	exp, ok := in.cookies[sum]
	if ok && !in.now().Before(exp) {
		delete(in.cookies, sum)
		return false
	}
	return ok
}

func (in *inspector) serveInspectAPI(w http.ResponseWriter, r *http.Request, api string) {
	if r.Method == http.MethodPost && r.Header.Get(inspectHeader) == "" {
		http.Error(w, "inspect: POST requests need the "+inspectHeader+" header", http.StatusForbidden)
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
		body := in.environment()
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
		in.local.ServeHTTP(w, r2)
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

func (in *inspector) inspectLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	bearer, ok := bearerHeader(r)
	if !ok {
		route.Unauthorized(w)
		return
	}
	exp, ok := in.inspectBearer(bearer)
	if !ok {
		route.Unauthorized(w)
		return
	}
	now := in.now()
	if limit := now.Add(inspectCookieTTL); exp.After(limit) {
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
	for len(in.cookies) >= inspectMaxCookies {
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
		Name: inspectCookie, Value: val, Path: inspectPrefix,
		MaxAge:   int(exp.Sub(now) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"expires": exp.UTC().Format(time.RFC3339)})
}

func (in *inspector) inspectLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	if ck, err := r.Cookie(inspectCookie); err == nil {
		in.mu.Lock()
		delete(in.cookies, sha256.Sum256([]byte(ck.Value)))
		in.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: inspectCookie, Value: "", Path: inspectPrefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// inspectSession is one row of GET /inspect/api/sessions.
type inspectSession struct {
	ID        string       `json:"id"`
	Owner     string       `json:"owner"` // key, subject NAME, or token
	Started   time.Time    `json:"started"`
	Connected bool         `json:"connected"`
	LastSeq   uint64       `json:"last_seq"`
	Prompts   []promptInfo `json:"prompts"`
	// Resources are the samples of its cgroup (resources.go), oldest
	// first; none when its processes run in no cgroup.
	Resources []resourceSample `json:"resources,omitempty"`
}

func (in *inspector) inspectSessions(w http.ResponseWriter) {
	list := in.live.all()
	out := make([]inspectSession, 0, len(list))
	for _, ss := range list {
		res, _ := ss.obs.resources()
		out = append(out, inspectSession{
			Resources: res,
			ID:        ss.id, Owner: ownerLabel(ss.owner), Started: ss.obs.started.UTC(),
			Connected: ss.stream.conn.Load() != nil, LastSeq: ss.stream.lastSeq.Load(),
			Prompts: ss.obs.promptList(),
		})
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
func (in *inspector) inspectEvents(w http.ResponseWriter, r *http.Request, id string) {
	ss := in.live.lookup(id)
	if ss == nil {
		http.NotFound(w, r)
		return
	}
	past, ch, ok := ss.obs.subscribe()
	if !ok {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "inspect: the session has ended or has too many observers", http.StatusServiceUnavailable)
		return
	}
	defer ss.obs.unsubscribe(ch)
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
	beat := time.NewTicker(inspectHeartbeat)
	defer beat.Stop()
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				why := "ended"
				if ss.ctx.Err() == nil {
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
		case <-in.done:
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
func (in *inspector) inspectAnswer(w http.ResponseWriter, r *http.Request, id, slotID string) {
	ss := in.live.lookup(id)
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
	sl := ss.slots.get(slotID)
	if sl == nil || sl.wait == nil {
		http.Error(w, "inspect: no display slot "+slotID+" waits for an answer on this session", http.StatusNotFound)
		return
	}
	if body.Reject != nil {
		reason, _ := json.Marshal(*body.Reject)
		ss.slots.settle(slotID, slotResult{rejected: true, value: reason})
	} else {
		if len(body.Value) == 0 {
			body.Value = json.RawMessage("null")
		}
		ss.slots.settle(slotID, slotResult{value: body.Value})
	}
	w.WriteHeader(http.StatusNoContent)
}

// inspectAbort aborts a running or queued prompt from the page, as the
// session's client's abort message does: a running one is cancelled (its
// processes stopped), a queued one removed; the client gets the prompt's
// AbortError either way. 404 for a session or prompt the kit does not
// know, 409 for a prompt that has already ended.
func (in *inspector) inspectAbort(w http.ResponseWriter, r *http.Request, id, promptID string) {
	ss := in.live.lookup(id)
	if ss == nil {
		http.Error(w, "inspect: no live session "+id, http.StatusNotFound)
		return
	}
	if ss.prompts.abort(promptID) {
		ss.logger().Info("prompt aborted from the inspector", "id", promptID)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	for _, p := range ss.obs.promptList() {
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
func (in *inspector) inspectEgress(w http.ResponseWriter, r *http.Request) {
	q, err := egress.ParseQuery(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, "inspect: egress: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if in.egress == nil || in.egress.audit == nil {
		return
	}
	q.Follow = false
	lines, _, err := in.egress.audit.Since(q)
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
