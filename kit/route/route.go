// Package route is how a feature of the kit answers HTTP: the routes it
// mounts on the box's handler, the credential check it is handed, and the
// plain answers every route shares (401, 405, a JSON body).
//
// A feature is a small type that owns its state and returns its routes
// (a Routes method); the kit builds it at boot with what it needs (the
// credential check, the logger, the clock) and mounts its routes in
// order, before the WebSocket upgrade that takes any other path.
package route

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Route is one of the box's HTTP routes: the requests it takes, and how it
// answers them. The box asks its routes in order; the first that matches
// answers.
type Route struct {
	Match func(r *http.Request) bool
	Serve http.HandlerFunc
}

// Path is the route of one exact path.
func Path(path string, serve http.HandlerFunc) Route {
	return Route{Match: func(r *http.Request) bool { return r.URL.Path == path }, Serve: serve}
}

// Prefix is the route of every path under prefix; serve gets the rest of
// the path.
func Prefix(prefix string, serve func(w http.ResponseWriter, r *http.Request, rest string)) Route {
	return Route{
		Match: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, prefix) },
		Serve: func(w http.ResponseWriter, r *http.Request) { serve(w, r, strings.TrimPrefix(r.URL.Path, prefix)) },
	}
}

// Auth checks a request's credential: the box key, or a live token minted
// from it. Each method lets the request on or answers 401 (Unauthorized)
// and reports false, and the handler returns.
type Auth interface {
	// Admit lets on a token that grants one of scopes.
	Admit(w http.ResponseWriter, r *http.Request, scopes ...string) bool
	// AdmitClaims lets on a token whose claims grants accepts.
	AdmitClaims(w http.ResponseWriter, r *http.Request, grants func(protocol.TokenClaims) bool) bool
}

// Bearer extracts the token of an Authorization header as v1 does:
// the header must start with "Bearer " (case-sensitive) and the token is
// the rest, trimmed. ok is false when there is no such header.
func Bearer(r *http.Request) (token string, ok bool) {
	h := r.Header.Get("Authorization")
	rest, found := strings.CutPrefix(h, "Bearer ")
	if !found {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// Unauthorized answers 401 with WWW-Authenticate and an empty body, the
// same for a missing, wrong, expired or out-of-scope credential.
func Unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="glovebox"`)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusUnauthorized)
}

// MethodNotAllowed answers 405 with the methods the route takes.
func MethodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusMethodNotAllowed)
}

// JSON answers a GET or HEAD with a JSON body that holds nothing a cache
// may keep.
func JSON(w http.ResponseWriter, r *http.Request, body []byte) {
	Body(w, r, "application/json", "private, no-store", body)
}

// Body answers with body, its Content-Type and Content-Length, and
// cacheControl; a HEAD gets the headers alone.
func Body(w http.ResponseWriter, r *http.Request, contentType, cacheControl string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", cacheControl)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

// Lines answers a GET of JSON lines: backlog, then, when lines is
// not nil (a follower), each line as it comes, until the client or the
// kit (done) goes. dropped, asked before each line that follows, returns
// a line that says how many this reader missed, or nil. What waits is
// sent in one go, then flushed.
func Lines(w http.ResponseWriter, r *http.Request, done <-chan struct{}, backlog [][]byte, lines <-chan []byte, dropped func() []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	for _, line := range backlog {
		if _, err := w.Write(line); err != nil {
			return
		}
	}
	if lines == nil {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case line := <-lines:
			if d := dropped(); d != nil {
				if _, err := w.Write(d); err != nil {
					return
				}
			}
			if _, err := w.Write(line); err != nil {
				return
			}
			for more := true; more; {
				select {
				case line := <-lines:
					if _, err := w.Write(line); err != nil {
						return
					}
				default:
					more = false
				}
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}
