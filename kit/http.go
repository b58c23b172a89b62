package kit

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
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

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cors(w, r) { // cors.go
		return
	}
	if s.replayElsewhere(w, r) {
		return
	}
	p := r.URL.Path
	switch {
	case p == "/health" || p == livePath:
		s.serveHealth(w, r)
	case p == "/environment":
		s.serveEnvironment(w, r)
	case p == "/sbom":
		s.serveSBOM(w, r) // sbom_route.go
	case p == "/egress":
		s.serveEgress(w, r)
	case p == "/egress/log":
		s.serveEgressLog(w, r) // audit_route.go
	case p == "/metrics":
		s.serveMetrics(w, r)
	case p == "/sessions":
		s.serveSessions(w, r)
	case strings.HasPrefix(p, "/sessions/") && strings.HasSuffix(p, "/egress") && strings.Count(p, "/") == 3:
		s.serveSessionEgress(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/sessions/"), "/egress"))
	case p == "/runs" || strings.HasPrefix(p, "/runs/"):
		s.serveRuns(w, r, strings.TrimPrefix(strings.TrimPrefix(p, "/runs"), "/")) // runs_route.go
	case p == "/logs":
		s.serveLogs(w, r)
	case p == "/files":
		s.serveFileList(w, r)
	case strings.HasPrefix(p, "/files/") && r.Method == http.MethodDelete:
		s.serveFileDelete(w, r, strings.TrimPrefix(p, "/files/"))
	case strings.HasPrefix(p, "/files/"):
		s.serveFiles(w, r, strings.TrimPrefix(p, "/files/"))
	case strings.HasPrefix(p, protocol.UploadPath):
		s.serveUpload(w, r, strings.TrimPrefix(p, protocol.UploadPath))
	case isInspectPath(p):
		s.serveInspect(w, r)
	case wsconn.IsUpgrade(r):
		s.serveWS(w, r)
	default:
		http.NotFound(w, r)
	}
}

// livePath is the liveness probe: 200 while the kit serves HTTP, draining
// included. /health is readiness: 503 while the box drains, so that load
// balancers move away, which a liveness probe must not read as a hung box
// to restart in the middle of its drain.
const livePath = "/health/live"

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	// Anyone may ask whether the box is up; only the key or a token
	// learns its sandbox's layers and gaps.
	auth := false
	if _, ok := bearerHeader(r); ok {
		auth = s.allows(r, func(protocol.TokenClaims) bool { return true })
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
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if !s.admit(w, r, protocol.ScopeEnvironment) {
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
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if !s.fileAuthorized(r, id) {
		unauthorized(w)
		return
	}
	s.local.ServeHTTP(w, r)
}

// bearerHeader extracts the token of an Authorization header as v1 does:
// the header must start with "Bearer " (case-sensitive) and the token is
// the rest, trimmed. ok is false when there is no such header.
func bearerHeader(r *http.Request) (token string, ok bool) {
	h := r.Header.Get("Authorization")
	rest, found := strings.CutPrefix(h, "Bearer ")
	if !found {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// bearerSubprotocol extracts the key or token a browser offers as
// "bearer.<key>" in Sec-WebSocket-Protocol.
func bearerSubprotocol(r *http.Request) (token string, ok bool) {
	for _, p := range wsconn.RequestedSubprotocols(r) {
		if t, found := strings.CutPrefix(p, SubprotocolBearerPrefix); found {
			return t, true
		}
	}
	return "", false
}

// admit lets a request on to its route when its bearer header is the key
// or a live token granting one of scopes. Otherwise it answers 401 with
// WWW-Authenticate and an empty body, and reports false: the handler
// returns. Every bearer-header route but /files/{id} (which takes
// ?token= too) and /inspect (which takes its cookie) checks this way.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, scopes ...string) bool {
	return s.admitClaims(w, r, func(c protocol.TokenClaims) bool {
		return slices.ContainsFunc(scopes, c.Allows)
	})
}

// admitClaims is admit for a route that judges a token by more than its
// scopes: grants decides on its claims.
func (s *Server) admitClaims(w http.ResponseWriter, r *http.Request, grants func(protocol.TokenClaims) bool) bool {
	if s.allows(r, grants) {
		return true
	}
	unauthorized(w)
	return false
}

// allows checks a request's bearer header: the key, or a live token whose
// claims grants accepts.
func (s *Server) allows(r *http.Request, grants func(protocol.TokenClaims) bool) bool {
	bearer, present := bearerHeader(r)
	if !present {
		return false
	}
	if s.isKey(bearer) {
		return true
	}
	c, valid := s.tokenClaims(bearer)
	return valid && grants(c)
}

// isKey reports whether bearer is the box key, compared in constant time
// (both are hashed first, so neither the comparison's time nor its early
// exit says anything about the key's length).
func (s *Server) isKey(bearer string) bool {
	sum := sha256.Sum256([]byte(bearer))
	return subtle.ConstantTimeCompare(sum[:], s.keySum[:]) == 1
}

// authorized checks a bearer for a route of scope: the key (isKey), or a
// token (protocol.VerifyToken) that grants scope and, when fileID is set,
// that file. ok false (no bearer) fails.
func (s *Server) authorized(bearer string, ok bool, scope, fileID string) bool {
	if !ok {
		return false
	}
	if s.isKey(bearer) {
		return true
	}
	return s.tokenAllows(bearer, scope, fileID)
}

// identityKey is the identity of the box key's holder.
const identityKey = "key"

// identity names the credential bearer opened a session with: "key" for
// the box key, "sub:SUBJECT" for a token with a subject, else
// "token:HASH" of the token itself. Only the same identity may resume
// the session.
func identity(bearer string, c protocol.TokenClaims, isKey bool) string {
	switch {
	case isKey:
		return identityKey
	case c.Subject != "":
		return "sub:" + c.Subject
	}
	sum := sha256.Sum256([]byte(bearer))
	return "token:" + hex.EncodeToString(sum[:12])
}

// connectIdentity checks a WebSocket bearer for the connect scope and
// returns its identity, or ok false.
func (s *Server) connectIdentity(bearer string, present bool) (id string, ok bool) {
	if !present {
		return "", false
	}
	if s.isKey(bearer) {
		return identity(bearer, protocol.TokenClaims{}, true), true
	}
	c, ok := s.tokenClaims(bearer)
	if !ok || !c.Allows(protocol.ScopeConnect) {
		return "", false
	}
	return identity(bearer, c, false), true
}

// fileAuthorized checks a /files request: the bearer header, else a token
// (never the key: query strings end up in logs) in ?token=.
func (s *Server) fileAuthorized(r *http.Request, id string) bool {
	if bearer, ok := bearerHeader(r); ok {
		return s.authorized(bearer, ok, protocol.ScopeFiles, id)
	}
	tok := r.URL.Query().Get("token")
	return tok != "" && s.tokenAllows(tok, protocol.ScopeFiles, id)
}

// tokenAllows reports whether tok is a live token minted from the key
// that grants scope (and fileID, when set).
func (s *Server) tokenAllows(tok, scope, fileID string) bool {
	c, ok := s.tokenClaims(tok)
	if !ok {
		return false
	}
	if fileID != "" {
		return c.AllowsFile(fileID)
	}
	return c.Allows(scope)
}

// tokenClaims verifies tok against the box key.
func (s *Server) tokenClaims(tok string) (protocol.TokenClaims, bool) {
	if !strings.HasPrefix(tok, protocol.TokenPrefix) {
		return protocol.TokenClaims{}, false
	}
	now := time.Now
	if s.opts.Now != nil {
		now = s.opts.Now
	}
	c, err := protocol.VerifyToken(s.opts.Key, tok, now())
	if err != nil {
		s.log.Debug("token refused", "err", err)
		return protocol.TokenClaims{}, false
	}
	return c, true
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="glovebox"`)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusUnauthorized)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusMethodNotAllowed)
}
