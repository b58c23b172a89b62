package protocol_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

// tokenKey is the key of the golden token vectors.
const tokenKey = "Wq5tFJ0yXbvh3Zl2m0uT8gS1oQeVYc7dHkRzA4nKpLw"

// tokenVectors are fixed claims and the token MintToken must make of them
// under tokenKey. The first was also computed outside Go (Python's hmac).
var tokenVectors = []struct {
	name   string
	claims protocol.TokenClaims
	token  string
}{
	{
		name:   "connect",
		claims: protocol.TokenClaims{Scopes: []string{"connect"}, Expires: time.Unix(1893456000, 0).UTC()},
		token:  "gbt1.eyJzY29wZXMiOlsiY29ubmVjdCJdLCJleHAiOjE4OTM0NTYwMDB9.BLwdQdnTQhX-98ikbP-J-GGYB2u-eHzEa4DZWbpWQH8",
	},
	{
		name:   "files and environment",
		claims: protocol.TokenClaims{Scopes: []string{"files", "environment"}, Expires: time.Unix(1893456000, 0).UTC(), Files: []string{"f_1", "f_2"}},
		token:  "gbt1.eyJzY29wZXMiOlsiZmlsZXMiLCJlbnZpcm9ubWVudCJdLCJleHAiOjE4OTM0NTYwMDAsImZpbGVzIjpbImZfMSIsImZfMiJdfQ.gRs9FZ9aCtdRoa_Md20uBisq2qGM8eBd3UKnMfAO76I",
	},
}

// tokenNow is before every vector's expiry.
var tokenNow = time.Unix(1893455000, 0)

func TestTokenVectors(t *testing.T) {
	t.Parallel()
	for _, v := range tokenVectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := protocol.MintToken(tokenKey, v.claims)
			if err != nil || got != v.token {
				t.Fatalf("MintToken = %q, %v, want %q", got, err, v.token)
			}
			c, err := protocol.VerifyToken(tokenKey, v.token, tokenNow)
			if err != nil {
				t.Fatalf("VerifyToken: %v", err)
			}
			if diff := cmp.Diff(v.claims, c); diff != "" {
				t.Errorf("VerifyToken claims (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMintTokenRejects(t *testing.T) {
	t.Parallel()
	exp := time.Unix(1893456000, 0)
	long := make([]string, 400)
	for i := range long {
		long[i] = strings.Repeat("x", 12)
	}
	for _, tc := range []struct {
		name string
		key  string
		c    protocol.TokenClaims
		want string
	}{
		{"empty key", "", protocol.TokenClaims{Scopes: []string{"connect"}, Expires: exp}, "empty key"},
		{"no expiry", tokenKey, protocol.TokenClaims{Scopes: []string{"connect"}}, "no expiry"},
		{"no scopes", tokenKey, protocol.TokenClaims{Expires: exp}, "no scopes"},
		{"unknown scope", tokenKey, protocol.TokenClaims{Scopes: []string{"connect", "root"}, Expires: exp}, `unknown scope "root"`},
		{"files without scope", tokenKey, protocol.TokenClaims{Scopes: []string{"connect"}, Expires: exp, Files: []string{"a"}}, "without"},
		{"empty file id", tokenKey, protocol.TokenClaims{Scopes: []string{"files"}, Expires: exp, Files: []string{""}}, "empty file id"},
		{"too long", tokenKey, protocol.TokenClaims{Scopes: []string{"files"}, Expires: exp, Files: long}, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := protocol.MintToken(tc.key, tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("MintToken = %q, %v, want an error containing %q", got, err, tc.want)
			}
		})
	}
}

// forge signs arbitrary claims JSON with key as the format says, to test
// what VerifyToken makes of claims MintToken never writes.
func forge(t *testing.T, key, claims string) string {
	t.Helper()
	mk := hmac.New(sha256.New, []byte(key))
	mk.Write([]byte("glovebox token v1"))
	m := hmac.New(sha256.New, mk.Sum(nil))
	signed := "gbt1." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	m.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestForgeMatchesMint(t *testing.T) {
	t.Parallel()
	if got := forge(t, tokenKey, `{"scopes":["connect"],"exp":1893456000}`); got != tokenVectors[0].token {
		t.Errorf("forge = %q, want %q", got, tokenVectors[0].token)
	}
}

func TestVerifyTokenRejects(t *testing.T) {
	t.Parallel()
	valid := tokenVectors[0].token
	other, err := protocol.MintToken(protocol.NewKey(), tokenVectors[0].claims)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token string
		now   time.Time
		want  error
	}{
		{"empty", "", tokenNow, protocol.ErrTokenMalformed},
		{"the key itself", tokenKey, tokenNow, protocol.ErrTokenMalformed},
		{"unknown version", "gbt2." + strings.TrimPrefix(valid, "gbt1."), tokenNow, protocol.ErrTokenMalformed},
		{"no MAC", strings.TrimSuffix(valid, valid[strings.LastIndex(valid, "."):]), tokenNow, protocol.ErrTokenMalformed},
		{"extra part", valid + ".x", tokenNow, protocol.ErrTokenMalformed},
		{"trailing newline", valid + "\n", tokenNow, protocol.ErrTokenMalformed},
		{"newline inside", valid[:20] + "\r\n" + valid[20:], tokenNow, protocol.ErrTokenMalformed},
		{"padded MAC", valid + "=", tokenNow, protocol.ErrTokenMalformed},
		{"short MAC", valid[:len(valid)-4], tokenNow, protocol.ErrTokenMalformed},
		{"too long", valid + strings.Repeat("A", protocol.MaxTokenLen), tokenNow, protocol.ErrTokenMalformed},
		{"another key", other, tokenNow, protocol.ErrTokenSignature},
		{"claims changed", strings.Replace(valid, "eyJzY29wZXMiOlsiY29ubmVjdCJd", "eyJzY29wZXMiOlsiY29ubmVjdCJe", 1), tokenNow, protocol.ErrTokenSignature},
		{"expired", valid, time.Unix(1893456000, 0), protocol.ErrTokenExpired},
		{"long expired", valid, time.Unix(1993456000, 0), protocol.ErrTokenExpired},
		{"no expiry", forge(t, tokenKey, `{"scopes":["connect"]}`), tokenNow, protocol.ErrTokenMalformed},
		{"zero expiry", forge(t, tokenKey, `{"scopes":["connect"],"exp":0}`), tokenNow, protocol.ErrTokenMalformed},
		{"claims not JSON", forge(t, tokenKey, `{"scopes":`), tokenNow, protocol.ErrTokenMalformed},
		{"claims not an object", forge(t, tokenKey, `[1]`), tokenNow, protocol.ErrTokenMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := protocol.VerifyToken(tokenKey, tc.token, tc.now)
			if !errors.Is(err, tc.want) {
				t.Errorf("VerifyToken(%q) = %+v, %v, want %v", tc.token, c, err, tc.want)
			}
		})
	}
}

func TestVerifyTokenKeepsUnknownScopes(t *testing.T) {
	t.Parallel()
	tok := forge(t, tokenKey, `{"scopes":["connect","root"],"exp":1893456000}`)
	c, err := protocol.VerifyToken(tokenKey, tok, tokenNow)
	if err != nil {
		t.Fatalf("VerifyToken: %v", err)
	}
	if !c.Allows("connect") || c.Allows("root") || c.Allows("files") {
		t.Errorf("claims %+v: Allows(connect, root, files) = %v %v %v, want true false false", c, c.Allows("connect"), c.Allows("root"), c.Allows("files"))
	}
}

func TestTokenClaimsAllowsFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    protocol.TokenClaims
		id   string
		want bool
	}{
		{protocol.TokenClaims{Scopes: []string{"files"}}, "any", true},
		{protocol.TokenClaims{Scopes: []string{"files"}, Files: []string{"a", "b"}}, "b", true},
		{protocol.TokenClaims{Scopes: []string{"files"}, Files: []string{"a", "b"}}, "c", false},
		{protocol.TokenClaims{Scopes: []string{"connect", "environment"}}, "a", false},
	} {
		if got := tc.c.AllowsFile(tc.id); got != tc.want {
			t.Errorf("%+v.AllowsFile(%q) = %v, want %v", tc.c, tc.id, got, tc.want)
		}
	}
}

func FuzzVerifyToken(f *testing.F) {
	minted := map[string]bool{}
	for _, v := range tokenVectors {
		minted[v.token] = true
		f.Add(v.token, uint(0), byte('A'))
		f.Add(v.token, uint(len(v.token)-1), byte('B'))
		f.Add(v.token, uint(10), byte('.'))
	}
	f.Add("gbt1..", uint(3), byte(0))
	f.Add("gbt1.e30.", uint(7), byte('='))
	f.Fuzz(func(t *testing.T, s string, at uint, b byte) {
		// Whatever s is, it verifies only when it is a token minted
		// from tokenKey, which here means one of the vectors.
		if _, err := protocol.VerifyToken(tokenKey, s, tokenNow); err == nil && !minted[s] {
			t.Fatalf("VerifyToken(%q) verified a token it did not mint", s)
		}
		// A minted token with one byte changed never verifies.
		for _, v := range tokenVectors {
			m := []byte(v.token)
			m[at%uint(len(m))] = b
			if string(m) == v.token {
				continue
			}
			if c, err := protocol.VerifyToken(tokenKey, string(m), tokenNow); err == nil {
				t.Fatalf("VerifyToken(%q) = %+v, want an error (mutated from %q)", m, c, v.token)
			}
			// Nor does a prefix or an extension of one.
			cut := v.token[:at%uint(len(v.token))]
			if _, err := protocol.VerifyToken(tokenKey, cut, tokenNow); err == nil {
				t.Fatalf("VerifyToken(%q) verified a prefix of %q", cut, v.token)
			}
			if _, err := protocol.VerifyToken(tokenKey, v.token+string(rune(b)), tokenNow); err == nil {
				t.Fatalf("VerifyToken verified %q extended by %q", v.token, b)
			}
		}
	})
}
