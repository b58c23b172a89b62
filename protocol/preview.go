package protocol

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Preview ports: a port a session's process listens on, reachable through
// the box at https://<link id>.<preview domain>/ for whoever holds the
// link (a signed, expiring, revocable credential) and nobody else. The
// preview domain is a wildcard DNS name pointing at the box, set in the
// manifest (PreviewSpec): previews never share an origin with the box's
// own pages.
//
// POST /sessions/{id}/previews with a PreviewRequest mints a link (201,
// a Preview with its URL and Link); GET /sessions/{id}/previews lists the
// session's live links (a PreviewList, without their Link); DELETE
// /sessions/{id}/previews/{link id} revokes one (204). Each takes the key,
// a token with ScopePreview or ScopeAdmin, or the session's own connect
// credential. The box announces CapPreview where it can serve them.

// PreviewSpec is the manifest's preview field.
type PreviewSpec struct {
	// Domain is the wildcard domain previews are served under:
	// "preview.example.com" serves a link at
	// <link id>.preview.example.com, with *.preview.example.com pointing
	// at the box. Lower case, no port, no scheme.
	Domain string `json:"domain"`
	// HTTP serves preview URLs as http:// instead of https:// (a box on
	// a developer's machine under "localhost"). Off by default.
	HTTP bool `json:"http,omitempty"`
}

// Check reports what is wrong with the spec, as a manifest line.
func (p *PreviewSpec) Check() error {
	d := p.Domain
	if d == "" {
		return errors.New("manifest: preview.domain is empty: set the wildcard domain previews are served under, such as \"preview.example.com\"")
	}
	if len(d) > 200 || !previewDomainRE.MatchString(d) {
		return fmt.Errorf("manifest: preview.domain %q is not a domain name: want lower-case labels separated by dots, such as \"preview.example.com\", with no scheme, port or wildcard", d)
	}
	return nil
}

var previewDomainRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// PreviewRequest is the body of POST /sessions/{id}/previews.
type PreviewRequest struct {
	// Port is the TCP port the session's process listens on (inside the
	// session's network namespace, on 127.0.0.1 or ::1).
	Port int `json:"port"`
	// TTL is how long the link works, as ParseDuration reads it ("1h");
	// empty is DefaultPreviewTTL, and more than MaxPreviewTTL is refused.
	TTL string `json:"ttl,omitempty"`
}

// Preview link lifetimes.
const (
	DefaultPreviewTTL = time.Hour
	MaxPreviewTTL     = 7 * 24 * time.Hour
)

// Preview is a preview link: the answer to POST (with Link and URL
// carrying it) and each item of GET's list (without).
type Preview struct {
	// ID is the link's id, the first label of its host name.
	ID      string `json:"id"`
	Session string `json:"session"`
	Port    int    `json:"port"`
	// URL is where a browser opens the preview: with the link in its
	// query on POST's answer (the first visit trades it for a cookie),
	// the bare origin in a list.
	URL string `json:"url"`
	// Link is the credential itself (gbp1....), only in POST's answer:
	// API clients send it as "Authorization: Bearer LINK".
	Link    string    `json:"link,omitempty"`
	Expires time.Time `json:"expires"`
}

// PreviewList is the body of GET /sessions/{id}/previews.
type PreviewList struct {
	Previews []Preview `json:"previews"`
}

// A preview link is
//
//	"gbp1." + base64url(claims JSON) + "." + base64url(MAC)
//
// with claims {"id":LINK_ID,"sid":SESSION,"port":N,"exp":UNIX_SECONDS}
// and MAC the HMAC-SHA256 of the part before the last dot under
// HMAC-SHA256(box key, "glovebox preview v1"): a key of its own, so that
// a link is never a token and a token never a link.
const (
	PreviewLinkPrefix = "gbp1."
	// PreviewQuery is the query parameter a preview URL carries its link
	// in, and PreviewCookie the cookie a first visit trades it for.
	PreviewQuery  = "glovebox_preview"
	PreviewCookie = "glovebox_preview"
	// MaxPreviewLinkLen caps a link's length.
	MaxPreviewLinkLen = 1024
)

// ErrPreviewLink is why VerifyPreviewLink refuses a link (wrapped).
var ErrPreviewLink = errors.New("protocol: not a valid preview link for this box")

// PreviewClaims are what a preview link grants: one session's port, until
// Expires.
type PreviewClaims struct {
	ID      string
	Session string
	Port    int
	Expires time.Time
}

type previewClaims struct {
	ID   string `json:"id"`
	SID  string `json:"sid"`
	Port int    `json:"port"`
	Exp  int64  `json:"exp"`
}

// previewIDRE is a link id: a DNS label of lower-case letters and digits.
var previewIDRE = regexp.MustCompile(`^[a-z0-9]{8,32}$`)

// ValidPreviewID reports whether id may be a link id.
func ValidPreviewID(id string) bool { return previewIDRE.MatchString(id) }

func previewMAC(key, signed string) []byte {
	k := hmac.New(sha256.New, []byte(key))
	k.Write([]byte("glovebox preview v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// MintPreviewLink returns the link for c signed with key.
func MintPreviewLink(key string, c PreviewClaims) (string, error) {
	switch {
	case key == "":
		return "", errors.New("mint preview link: empty key")
	case !ValidPreviewID(c.ID):
		return "", fmt.Errorf("mint preview link: id %q is not 8 to 32 lower-case letters and digits", c.ID)
	case c.Session == "":
		return "", errors.New("mint preview link: no session")
	case c.Port < 1 || c.Port > 65535:
		return "", fmt.Errorf("mint preview link: port %d is not 1 to 65535", c.Port)
	case c.Expires.Unix() <= 0:
		return "", errors.New("mint preview link: no expiry")
	}
	payload, err := json.Marshal(previewClaims{ID: c.ID, SID: c.Session, Port: c.Port, Exp: c.Expires.Unix()})
	if err != nil {
		return "", fmt.Errorf("mint preview link: %w", err)
	}
	signed := PreviewLinkPrefix + tokenB64.EncodeToString(payload)
	link := signed + "." + tokenB64.EncodeToString(previewMAC(key, signed))
	if len(link) > MaxPreviewLinkLen {
		return "", fmt.Errorf("mint preview link: %d bytes, longer than %d (a shorter session id)", len(link), MaxPreviewLinkLen)
	}
	return link, nil
}

// VerifyPreviewLink checks link's signature against key (in constant
// time, before reading the claims) and returns its claims, expired or not:
// the caller tells an expired link (410 Gone) from a forged one. It fails
// with ErrPreviewLink (wrapped).
func VerifyPreviewLink(key, link string) (PreviewClaims, error) {
	bad := func(why string) (PreviewClaims, error) {
		return PreviewClaims{}, fmt.Errorf("%w: %s", ErrPreviewLink, why)
	}
	if key == "" {
		return bad("empty key")
	}
	if len(link) > MaxPreviewLinkLen {
		return bad("too long")
	}
	for i := 0; i < len(link); i++ {
		if !isTokenByte(link[i]) {
			return bad("a byte is not base64url or '.'")
		}
	}
	rest, ok := strings.CutPrefix(link, PreviewLinkPrefix)
	if !ok {
		return bad("not a gbp1 link")
	}
	payload64, mac64, ok := strings.Cut(rest, ".")
	if !ok || payload64 == "" || strings.Contains(mac64, ".") {
		return bad("want gbp1.CLAIMS.MAC")
	}
	mac, err := tokenB64.DecodeString(mac64)
	if err != nil || len(mac) != sha256.Size {
		return bad("bad MAC encoding")
	}
	if !hmac.Equal(mac, previewMAC(key, link[:len(PreviewLinkPrefix)+len(payload64)])) {
		return bad("signature does not match")
	}
	payload, err := tokenB64.DecodeString(payload64)
	if err != nil {
		return bad("bad claims encoding")
	}
	var pc previewClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pc); err != nil || dec.More() {
		return bad("bad claims")
	}
	if !ValidPreviewID(pc.ID) || pc.SID == "" || pc.Port < 1 || pc.Port > 65535 || pc.Exp <= 0 {
		return bad("incomplete claims")
	}
	return PreviewClaims{ID: pc.ID, Session: pc.SID, Port: pc.Port, Expires: time.Unix(pc.Exp, 0).UTC()}, nil
}
