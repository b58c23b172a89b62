package kit

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/files"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/kit/route"
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

// auth checks credentials: the box key, compared by its hash, and tokens
// minted from it, verified against the clock. Every route is handed it
// (as a route.Auth) rather than the server.
type auth struct {
	key    string
	keySum [sha256.Size]byte
	now    func() time.Time
	log    *slog.Logger
}

var _ files.Auth = (*auth)(nil)

func newAuth(key string, now func() time.Time, log *slog.Logger) *auth {
	return &auth{key: key, keySum: sha256.Sum256([]byte(key)), now: now, log: log}
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

// Admit lets a request on to its route when its bearer header is the key
// or a live token granting one of scopes. Otherwise it answers 401 with
// WWW-Authenticate and an empty body, and reports false: the handler
// returns. Every bearer-header route but /files/{id} (which takes
// ?token= too) and /inspect (which takes its cookie) checks this way.
func (a *auth) Admit(w http.ResponseWriter, r *http.Request, scopes ...string) bool {
	return a.AdmitClaims(w, r, func(c protocol.TokenClaims) bool {
		return slices.ContainsFunc(scopes, c.Allows)
	})
}

// AdmitClaims is Admit for a route that judges a token by more than its
// scopes: grants decides on its claims.
func (a *auth) AdmitClaims(w http.ResponseWriter, r *http.Request, grants func(protocol.TokenClaims) bool) bool {
	if a.allows(r, grants) {
		return true
	}
	route.Unauthorized(w)
	return false
}

// allows checks a request's bearer header: the key, or a live token whose
// claims grants accepts.
func (a *auth) allows(r *http.Request, grants func(protocol.TokenClaims) bool) bool {
	bearer, present := route.Bearer(r)
	if !present {
		return false
	}
	if a.isKey(bearer) {
		return true
	}
	c, valid := a.tokenClaims(bearer)
	return valid && grants(c)
}

// isKey reports whether bearer is the box key, compared in constant time
// (both are hashed first, so neither the comparison's time nor its early
// exit says anything about the key's length).
func (a *auth) isKey(bearer string) bool {
	sum := sha256.Sum256([]byte(bearer))
	return subtle.ConstantTimeCompare(sum[:], a.keySum[:]) == 1
}

// authorized checks a bearer for a route of scope: the key (isKey), or a
// token (protocol.VerifyToken) that grants scope and, when fileID is set,
// that file. ok false (no bearer) fails.
func (a *auth) authorized(bearer string, ok bool, scope, fileID string) bool {
	if !ok {
		return false
	}
	if a.isKey(bearer) {
		return true
	}
	return a.tokenAllows(bearer, scope, fileID)
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
func (a *auth) connectIdentity(bearer string, present bool) (id string, ok bool) {
	if !present {
		return "", false
	}
	if a.isKey(bearer) {
		return identity(bearer, protocol.TokenClaims{}, true), true
	}
	c, ok := a.tokenClaims(bearer)
	if !ok || !c.Allows(protocol.ScopeConnect) {
		return "", false
	}
	return identity(bearer, c, false), true
}

// MayRead checks a /files request (kit/files): the bearer header, else a
// token (never the key: query strings end up in logs) in ?token=.
func (a *auth) MayRead(r *http.Request, id string) bool {
	if bearer, ok := route.Bearer(r); ok {
		return a.authorized(bearer, ok, protocol.ScopeFiles, id)
	}
	tok := r.URL.Query().Get("token")
	return tok != "" && a.tokenAllows(tok, protocol.ScopeFiles, id)
}

// tokenAllows reports whether tok is a live token minted from the key
// that grants scope (and fileID, when set).
func (a *auth) tokenAllows(tok, scope, fileID string) bool {
	c, ok := a.tokenClaims(tok)
	if !ok {
		return false
	}
	if fileID != "" {
		return c.AllowsFile(fileID)
	}
	return c.Allows(scope)
}

// tokenClaims verifies tok against the box key.
func (a *auth) tokenClaims(tok string) (protocol.TokenClaims, bool) {
	if !strings.HasPrefix(tok, protocol.TokenPrefix) {
		return protocol.TokenClaims{}, false
	}
	c, err := protocol.VerifyToken(a.key, tok, a.now())
	if err != nil {
		a.log.Debug("token refused", "err", err)
		return protocol.TokenClaims{}, false
	}
	return c, true
}

// inspectGrant checks a bearer for the inspector (kit/inspect): the key,
// whose grant has no end of its own (zero), or a token with the inspect
// scope, until it expires. Either opens terminals from the page only
// when it would reach them on /sessions/{id}/terminals for every
// session: the key, or a token with the exec or admin scope too.
func (a *auth) inspectGrant(bearer string) (inspect.Grant, bool) {
	if a.isKey(bearer) {
		return inspect.Grant{Terminals: true}, true
	}
	c, ok := a.tokenClaims(bearer)
	if !ok || !c.Allows(protocol.ScopeInspect) {
		return inspect.Grant{}, false
	}
	return inspect.Grant{Ends: c.Expires, Terminals: c.Allows(protocol.ScopeExec) || c.Allows(protocol.ScopeAdmin)}, true
}
