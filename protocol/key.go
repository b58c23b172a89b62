package protocol

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// NewKey returns a fresh box key: 32 random bytes as unpadded base64url, 43
// characters from [A-Za-z0-9_-], as v1 generates them.
func NewKey() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("protocol: crypto/rand failed: %v", err)) // rand.Read never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Fingerprint returns the v1 key fingerprint: the SHA-256 of the key's bytes
// in lowercase hex, cut to its first 8 and last 4 characters joined by "...".
// Fingerprint("abc") is "ba7816bf...15ad".
func Fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return h[:8] + "..." + h[len(h)-4:]
}
