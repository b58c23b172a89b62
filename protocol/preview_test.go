package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPreviewLinkRoundTrip(t *testing.T) {
	t.Parallel()
	key := NewKey()
	c := PreviewClaims{ID: "abcdefgh12345678", Session: "s-1", Port: 8080, Expires: time.Unix(2000000000, 0).UTC()}
	link, err := MintPreviewLink(key, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, PreviewLinkPrefix) {
		t.Errorf("MintPreviewLink = %q, want prefix %q", link, PreviewLinkPrefix)
	}
	got, err := VerifyPreviewLink(key, link)
	if err != nil || got != c {
		t.Fatalf("VerifyPreviewLink = %+v, %v, want %+v", got, err, c)
	}
	// An expired link still verifies: the kit answers 410 for it.
	old := c
	old.Expires = time.Unix(1, 0).UTC()
	l2, _ := MintPreviewLink(key, old)
	if got, err := VerifyPreviewLink(key, l2); err != nil || got != old {
		t.Errorf("VerifyPreviewLink(expired) = %+v, %v, want its claims", got, err)
	}
	tok, _ := MintToken(key, TokenClaims{Scopes: []string{ScopePreview}, Expires: time.Now().Add(time.Hour)})
	for name, bad := range map[string]string{
		"another key":    mustLink(t, NewKey(), c),
		"a token":        tok,
		"token as link":  PreviewLinkPrefix + strings.TrimPrefix(tok, TokenPrefix),
		"empty":          "",
		"flipped claims": PreviewLinkPrefix + "x" + link[len(PreviewLinkPrefix)+1:],
		"newline":        link[:10] + "\n" + link[10:],
		"long":           link + strings.Repeat("a", MaxPreviewLinkLen),
	} {
		if _, err := VerifyPreviewLink(key, bad); !errors.Is(err, ErrPreviewLink) {
			t.Errorf("VerifyPreviewLink(%s) = %v, want ErrPreviewLink", name, err)
		}
	}
	for _, bad := range []PreviewClaims{
		{ID: "UPPER1234", Session: "s", Port: 1, Expires: c.Expires},
		{ID: "abcdefgh", Session: "", Port: 1, Expires: c.Expires},
		{ID: "abcdefgh", Session: "s", Port: 0, Expires: c.Expires},
		{ID: "abcdefgh", Session: "s", Port: 65536, Expires: c.Expires},
		{ID: "abcdefgh", Session: "s", Port: 1},
	} {
		if l, err := MintPreviewLink(key, bad); err == nil {
			t.Errorf("MintPreviewLink(%+v) = %q, want an error", bad, l)
		}
	}
}

func mustLink(t *testing.T, key string, c PreviewClaims) string {
	t.Helper()
	l, err := MintPreviewLink(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPreviewSpecCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		domain string
		ok     bool
	}{
		{"preview.example.com", true},
		{"localhost", true},
		{"", false},
		{"*.example.com", false},
		{"Preview.example.com", false},
		{"example.com:8080", false},
		{"https://example.com", false},
		{"-a.example.com", false},
		{"a..b", false},
	} {
		err := (&PreviewSpec{Domain: tc.domain}).Check()
		if (err == nil) != tc.ok {
			t.Errorf("PreviewSpec{%q}.Check() = %v, want ok %v", tc.domain, err, tc.ok)
		}
	}
}

// FuzzVerifyPreviewLink: a link from anyone never panics, and whatever
// verifies under the key mints back to itself.
func FuzzVerifyPreviewLink(f *testing.F) {
	key := "fuzz-key-0123456789"
	good, _ := MintPreviewLink(key, PreviewClaims{ID: "abcdefgh", Session: "s", Port: 3000, Expires: time.Unix(2000000000, 0)})
	for _, s := range []string{good, "", "gbp1.", "gbp1.e30.AAAA", good[:len(good)-2], strings.Replace(good, "gbp1", "gbt1", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, link string) {
		c, err := VerifyPreviewLink(key, link)
		if err != nil {
			return
		}
		again, err := MintPreviewLink(key, c)
		if err != nil {
			t.Fatalf("a verified link's claims %+v do not mint: %v", c, err)
		}
		if _, err := VerifyPreviewLink(key, again); err != nil {
			t.Fatalf("re-minted link does not verify: %v", err)
		}
	})
}
