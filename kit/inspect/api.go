package inspect

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// serveAPI answers /inspect/api/...: login and logout, then, for the
// key, an inspect token or a live cookie, the routes the package doc
// lists.
func (in *Inspector) serveAPI(w http.ResponseWriter, r *http.Request, api string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get(Header) == "" {
		http.Error(w, "inspect: "+r.Method+" requests need the "+Header+" header", http.StatusForbidden)
		return
	}
	if api == "login" {
		in.login(w, r)
		return
	}
	if api == "logout" {
		in.logout(w, r)
		return
	}
	g, ok := in.authorized(r)
	if !ok {
		route.Unauthorized(w)
		return
	}
	parts := strings.Split(api, "/")
	switch {
	case api == "sessions" && r.Method == http.MethodGet:
		in.listSessions(w, g.Terminals && in.o.Terminals != nil)
	case api == "history" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"sessions": in.history.list()})
	case api == "egress" && r.Method == http.MethodGet:
		in.egressLines(w, r)
	case api == "snapshots" && r.Method == http.MethodGet:
		if in.o.Snapshots == nil {
			http.NotFound(w, r)
			return
		}
		body, err := in.o.Snapshots(r.Context())
		if err != nil {
			http.Error(w, "list snapshots: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
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
	case (len(parts) == 3 || len(parts) == 4) && parts[0] == "sessions" && parts[2] == "terminals":
		in.terminals(w, r, g, parts[1], strings.TrimPrefix(api, "sessions/"+parts[1]+"/terminals"))
	case len(parts) == 3 && parts[0] == "sessions" && parts[2] == "events" && r.Method == http.MethodGet:
		in.events(w, r, parts[1])
	case len(parts) == 4 && parts[0] == "sessions" && parts[2] == "slots" && r.Method == http.MethodPost:
		in.answer(w, r, parts[1], parts[3])
	case len(parts) == 5 && parts[0] == "sessions" && parts[2] == "prompts" && parts[4] == "abort" && r.Method == http.MethodPost:
		in.abort(w, r, parts[1], parts[3])
	default:
		http.NotFound(w, r)
	}
}

func (in *Inspector) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	bearer, ok := route.Bearer(r)
	if !ok {
		route.Unauthorized(w)
		return
	}
	g, ok := in.bearerGrant(bearer)
	if !ok {
		route.Unauthorized(w)
		return
	}
	now := in.o.Now()
	if limit := now.Add(cookieTTL); g.Ends.After(limit) {
		g.Ends = limit
	}
	exp := g.Ends
	var b [32]byte
	rand.Read(b[:])
	val := base64.RawURLEncoding.EncodeToString(b[:])
	in.mu.Lock()
	for k, e := range in.cookies {
		if !now.Before(e.Ends) {
			delete(in.cookies, k)
		}
	}
	for len(in.cookies) >= maxCookies {
		var oldest [sha256.Size]byte
		var first time.Time
		for k, e := range in.cookies {
			if first.IsZero() || e.Ends.Before(first) {
				oldest, first = k, e.Ends
			}
		}
		delete(in.cookies, oldest)
	}
	in.cookies[sha256.Sum256([]byte(val))] = g
	in.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: val, Path: Prefix,
		MaxAge:   int(exp.Sub(now) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"expires": exp.UTC().Format(time.RFC3339), "terminals": g.Terminals && in.o.Terminals != nil})
}

func (in *Inspector) logout(w http.ResponseWriter, r *http.Request) {
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

// listSessions answers the live sessions, and whether this login may
// open terminals in them (the page shows its Terminal button then).
func (in *Inspector) listSessions(w http.ResponseWriter, terminals bool) {
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
	json.NewEncoder(w).Encode(map[string]any{"sessions": out, "terminals": terminals})
}

// events streams a session's frames as server-sent events: the
// recent ones kept, then each as it is sent, until the session ends, the
// observer falls too far behind (event "end" with data "dropped": the
// page reconnects) or the request ends.
func (in *Inspector) events(w http.ResponseWriter, r *http.Request, id string) {
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

// answer resolves or rejects a display slot from the page, as the
// session's client would.
func (in *Inspector) answer(w http.ResponseWriter, r *http.Request, id, slotID string) {
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

// abort aborts a running or queued prompt from the page, as the
// session's client's abort message does: a running one is cancelled (its
// processes stopped), a queued one removed; the client gets the prompt's
// AbortError either way. 404 for a session or prompt the kit does not
// know, 409 for a prompt that has already ended.
func (in *Inspector) abort(w http.ResponseWriter, r *http.Request, id, promptID string) {
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

// egressLines answers the egress audit trail's kept lines as GET
// /egress/log does (since and session; never follow: the page polls), an
// empty answer when the box has no egress proxy.
func (in *Inspector) egressLines(w http.ResponseWriter, r *http.Request) {
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

// terminals hands /inspect/api/sessions/{id}/terminals[/{tid}] to the
// box's own terminals: a login whose grant allows them (the key, or a
// token with the exec scope too), and, for the WebSocket that attaches
// one, a page of this origin (the cookie rides along with any page of
// the same site, another port of the host included).
func (in *Inspector) terminals(w http.ResponseWriter, r *http.Request, g Grant, id, rest string) {
	switch {
	case in.o.Terminals == nil:
		http.Error(w, "inspect: this box opens no terminals", http.StatusNotFound)
	case !g.Terminals:
		http.Error(w, "inspect: this login reads sessions but opens no terminals: log in with the box key, or a token with the "+protocol.ScopeExec+" scope besides "+protocol.ScopeInspect, http.StatusForbidden)
	case wsconn.IsUpgrade(r) && !sameOrigin(r):
		http.Error(w, "inspect: a terminal attaches only from the inspector's own page (Origin "+strconv.Quote(r.Header.Get("Origin"))+" is not this box's)", http.StatusForbidden)
	default:
		if r.Method == http.MethodPost {
			in.o.Log.Info("terminal opened from the inspector", "session", id)
		}
		in.o.Terminals.ServeTerminals(w, r, id, rest)
	}
}

// sameOrigin reports whether r's Origin names the host r was sent to.
func sameOrigin(r *http.Request) bool {
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}
