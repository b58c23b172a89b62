package protocol_test

import (
	"encoding/base64"
	"regexp"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestFingerprint checks spec §2.4's examples: the first 8 and last 4 hex
// characters of the key's SHA-256.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want string
	}{
		{"abc", "ba7816bf...15ad"},
		{"test-key", "62af8704...b0ef"},
		{"", "e3b0c442...b855"},
		{"test-key\n", "2ea55a1d...096b"}, // the kit does not trim the key
	}
	for _, tt := range tests {
		if got := protocol.Fingerprint(tt.key); got != tt.want {
			t.Errorf("Fingerprint(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

func TestNewKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		k := protocol.NewKey()
		if !keyRE.MatchString(k) {
			t.Fatalf("NewKey() = %q, want 43 characters from [A-Za-z0-9_-]", k)
		}
		b, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil || len(b) != 32 {
			t.Fatalf("NewKey() = %q decodes to %d bytes, %v, want 32 bytes of unpadded base64url", k, len(b), err)
		}
		if seen[k] {
			t.Fatalf("NewKey() = %q twice", k)
		}
		seen[k] = true
		if fp := protocol.Fingerprint(k); len(fp) != 15 {
			t.Errorf("Fingerprint(%q) = %q, want 15 characters", k, fp)
		}
	}
}
