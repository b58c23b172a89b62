package kit

import (
	"net/http"
	"strconv"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Subprotocols a browser client offers: SubprotocolV1 (which the kit
// selects) and SubprotocolBearerPrefix + key, which carries the key because
// browsers cannot set an Authorization header on a WebSocket. The bearer
// entry is never echoed back.
const (
	SubprotocolV1           = "glovebox.v1"
	SubprotocolBearerPrefix = "bearer."
)

// serveHTTP answers a request with the first of the box's routes that
// matches it (mounted at boot, in order), after CORS and Fly's replay have
// had their say.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cors.Handle(w, r) {
		return
	}
	if s.replayElsewhere(w, r) {
		return
	}
	for _, rt := range s.routes {
		if rt.Match(r) {
			rt.Serve(w, r)
			return
		}
	}
	http.NotFound(w, r)
}

// livePath is the liveness probe: 200 while the kit serves HTTP, draining
// included. /health is readiness: 503 while the box drains, so that load
// balancers move away, which a liveness probe must not read as a hung box
// to restart in the middle of its drain.
const livePath = "/health/live"

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	// Anyone may ask whether the box is up; only the key or a token
	// learns its sandbox's layers and gaps.
	auth := false
	if _, ok := bearerHeader(r); ok {
		auth = s.auth.allows(r, func(protocol.TokenClaims) bool { return true })
	}
	body, status := s.healthBody, http.StatusOK
	if auth {
		body = s.healthAuth
	}
	if s.draining.Load() {
		body = s.drainBody // drain.go
		if auth {
			body = s.drainAuth
		}
		if r.URL.Path != livePath {
			status = http.StatusServiceUnavailable
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

func (s *Server) serveEnvironment(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !s.auth.Admit(w, r, protocol.ScopeEnvironment) {
		return
	}
	if id := r.URL.Query().Get("session"); id != "" {
		s.sessionEnvironment(w, r, id) // kit/egress_session.go
		return
	}
	body := s.environmentBody()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request, id string) {
	if !storage.ValidID(id) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !s.auth.fileAuthorized(r, id) {
		route.Unauthorized(w)
		return
	}
	s.local.ServeHTTP(w, r)
}
