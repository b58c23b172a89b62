package protocol

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Tokens are scoped, expiring credentials derived from a box key. Whoever
// holds the key mints them (no request to the box) and hands them to a
// browser or another service; the box accepts one wherever it accepts the
// key, for the routes its scopes allow, until it expires.
//
// A token is
//
//	"gbt1." + base64url(claims JSON) + "." + base64url(MAC)
//
// with unpadded base64url, claims {"scopes":[...],"exp":UNIX_SECONDS,
// "files":[...],"sub":"..."} ("files" and "sub" omitted when empty), and MAC the HMAC-SHA256 of
// "gbt1." + base64url(claims JSON) under HMAC-SHA256(box key,
// "glovebox token v1"). Changing the box key revokes every token minted
// from it; nothing else does.
//
// Expiry is exact: a token verifies while now is before exp, with no
// allowance for clock skew, so a token's lifetime is its TTL shifted by the
// difference between the minter's clock and the box's. Mint with a TTL of
// minutes rather than seconds.
//
// MintToken refuses a scope it does not know; VerifyToken keeps such a
// scope in the claims it returns, where it grants nothing (Allows knows
// only the scopes below), so a token minted for a newer box still opens
// the routes an older box knows.
const (
	TokenPrefix = "gbt1."
	// MaxTokenLen caps a token's length: MintToken refuses to make a
	// longer one and VerifyToken rejects one before decoding it.
	MaxTokenLen = 4096
)

// CapTokens announces that the box accepts tokens (see MintToken) wherever
// it accepts the key, and a token in ?token= on GET /files/{id}.
const CapTokens = "tokens"

// Token scopes.
const (
	ScopeConnect     = "connect"     // the WebSocket: prompts and everything on it
	ScopeFiles       = "files"       // GET /files/{id}, limited to TokenClaims.Files when set
	ScopeEnvironment = "environment" // GET /environment
	ScopeAdmin       = "admin"       // runtime administration (the egress policy, GET /sessions, /logs, listing and deleting /files)
	ScopeInspect     = "inspect"     // the inspector at /inspect: sessions, their frames, display answers
	ScopeUpload      = "upload"      // PUT /uploads/{name}: files into the box's store
	ScopeMetrics     = "metrics"     // GET /metrics
	ScopeLogs        = "logs"        // GET /logs
	ScopeAudit       = "audit"       // GET /egress/log: the egress audit trail
	ScopeRuns        = "runs"        // GET /runs: every signed run record of the box
	// ScopeExec: terminals and processes in any session
	// (/sessions/{id}/terminals, /sessions/{id}/processes). A connect
	// token reaches those of the sessions it opened.
	ScopeExec = "exec"
	// ScopeWorkspace: a session's files (/sessions/{id}/fs), in any
	// session; a connect token reaches the sessions it opened.
	ScopeWorkspace = "workspace"
	// ScopePreview: a session's preview ports (/sessions/{id}/previews and
	// the links they mint), in any session; a connect token reaches the
	// sessions it opened.
	ScopePreview = "preview"
	// ScopeSnapshots: snapshots (GET, POST /snapshots), restores and
	// forks of any session; a connect token reaches the sessions it
	// opened.
	ScopeSnapshots = "snapshots"
)

// Scopes lists every scope a token may carry.
var Scopes = []string{ScopeConnect, ScopeFiles, ScopeEnvironment, ScopeAdmin, ScopeInspect, ScopeUpload, ScopeMetrics, ScopeLogs, ScopeAudit, ScopeRuns, ScopeExec, ScopeWorkspace, ScopePreview, ScopeSnapshots}

// Errors VerifyToken returns, wrapped.
var (
	ErrTokenMalformed = errors.New("protocol: malformed token")
	ErrTokenSignature = errors.New("protocol: token signature does not match the key")
	ErrTokenExpired   = errors.New("protocol: token expired")
)

// TokenClaims say what a token allows and until when.
type TokenClaims struct {
	// Scopes the token grants (ScopeConnect, ScopeFiles, ScopeEnvironment).
	Scopes []string
	// Expires is when the token stops working, to the second (MintToken
	// drops the fraction). Required.
	Expires time.Time
	// Files, when set, are the only /files ids a ScopeFiles token may read.
	Files []string
	// Subject names whom the token was minted for (a user, a service). A
	// session opened with a token can be resumed only by a token of the
	// same subject or, without one, by the same token. Optional.
	Subject string
}

// Allows reports whether the claims grant scope.
func (c TokenClaims) Allows(scope string) bool {
	return slices.Contains(Scopes, scope) && slices.Contains(c.Scopes, scope)
}

// AllowsFile reports whether the claims allow reading /files/{id}.
func (c TokenClaims) AllowsFile(id string) bool {
	return c.Allows(ScopeFiles) && (len(c.Files) == 0 || slices.Contains(c.Files, id))
}

// tokenClaims is the claims' JSON.
type tokenClaims struct {
	Scopes []string `json:"scopes"`
	Exp    int64    `json:"exp"`
	Files  []string `json:"files,omitempty"`
	Sub    string   `json:"sub,omitempty"`
}

var tokenB64 = base64.RawURLEncoding.Strict()

// tokenMACKey derives the token signing key from the box key, so that the
// box key itself never keys a MAC that leaves the machine.
func tokenMACKey(key string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("glovebox token v1"))
	return m.Sum(nil)
}

func tokenMAC(key, signed string) []byte {
	m := hmac.New(sha256.New, tokenMACKey(key))
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// MintToken returns a token for c signed with key. It fails on an empty
// key, a zero Expires, no scopes, an unknown scope, Files without
// ScopeFiles, an empty file id, or a token longer than MaxTokenLen.
func MintToken(key string, c TokenClaims) (string, error) {
	if key == "" {
		return "", errors.New("mint token: empty key")
	}
	if c.Expires.IsZero() {
		return "", errors.New("mint token: no expiry")
	}
	if len(c.Scopes) == 0 {
		return "", fmt.Errorf("mint token: no scopes (want some of %s)", strings.Join(Scopes, ", "))
	}
	for _, s := range c.Scopes {
		if !slices.Contains(Scopes, s) {
			return "", fmt.Errorf("mint token: unknown scope %q (want some of %s)", s, strings.Join(Scopes, ", "))
		}
	}
	if len(c.Files) > 0 && !slices.Contains(c.Scopes, ScopeFiles) {
		return "", fmt.Errorf("mint token: files limit given without the %q scope", ScopeFiles)
	}
	for _, f := range c.Files {
		if f == "" {
			return "", errors.New("mint token: empty file id")
		}
	}
	payload, err := json.Marshal(tokenClaims{Scopes: c.Scopes, Exp: c.Expires.Unix(), Files: c.Files, Sub: c.Subject})
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	signed := TokenPrefix + tokenB64.EncodeToString(payload)
	tok := signed + "." + tokenB64.EncodeToString(tokenMAC(key, signed))
	if len(tok) > MaxTokenLen {
		return "", fmt.Errorf("mint token: %d bytes, longer than %d (limit fewer files)", len(tok), MaxTokenLen)
	}
	return tok, nil
}

// VerifyToken checks token against key and returns its claims. It checks
// the signature (in constant time) before it reads the claims, and fails
// with ErrTokenMalformed, ErrTokenSignature or ErrTokenExpired (wrapped).
// The caller checks the scopes (TokenClaims.Allows).
func VerifyToken(key, token string, now time.Time) (TokenClaims, error) {
	if key == "" {
		return TokenClaims{}, fmt.Errorf("%w: empty key", ErrTokenSignature)
	}
	if len(token) > MaxTokenLen {
		return TokenClaims{}, fmt.Errorf("%w: longer than %d bytes", ErrTokenMalformed, MaxTokenLen)
	}
	// base64 decoding skips '\r' and '\n', so a token is checked for
	// stray bytes first: otherwise many strings would verify as one.
	for i := 0; i < len(token); i++ {
		if !isTokenByte(token[i]) {
			return TokenClaims{}, fmt.Errorf("%w: byte %d is not base64url or '.'", ErrTokenMalformed, i)
		}
	}
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return TokenClaims{}, fmt.Errorf("%w: not a %s token", ErrTokenMalformed, strings.TrimSuffix(TokenPrefix, "."))
	}
	payload64, mac64, ok := strings.Cut(rest, ".")
	if !ok || payload64 == "" || strings.Contains(mac64, ".") {
		return TokenClaims{}, fmt.Errorf("%w: want gbt1.CLAIMS.MAC", ErrTokenMalformed)
	}
	mac, err := tokenB64.DecodeString(mac64)
	if err != nil || len(mac) != sha256.Size {
		return TokenClaims{}, fmt.Errorf("%w: bad MAC encoding", ErrTokenMalformed)
	}
	if !hmac.Equal(mac, tokenMAC(key, token[:len(TokenPrefix)+len(payload64)])) {
		return TokenClaims{}, ErrTokenSignature
	}
	payload, err := tokenB64.DecodeString(payload64)
	if err != nil {
		return TokenClaims{}, fmt.Errorf("%w: bad claims encoding", ErrTokenMalformed)
	}
	var tc tokenClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&tc); err != nil || dec.More() {
		return TokenClaims{}, fmt.Errorf("%w: bad claims", ErrTokenMalformed)
	}
	if tc.Exp <= 0 {
		return TokenClaims{}, fmt.Errorf("%w: no expiry", ErrTokenMalformed)
	}
	c := TokenClaims{Scopes: tc.Scopes, Expires: time.Unix(tc.Exp, 0).UTC(), Files: tc.Files, Subject: tc.Sub}
	if !now.Before(c.Expires) {
		return TokenClaims{}, fmt.Errorf("%w at %s", ErrTokenExpired, c.Expires.Format(time.RFC3339))
	}
	return c, nil
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}
