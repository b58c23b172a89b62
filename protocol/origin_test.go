package protocol

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

func TestCheckOrigin(t *testing.T) {
	for _, o := range []string{"https://app.example.com", "http://127.0.0.1:3000", "http://localhost:8080", "https://[::1]:8443", "https://xn--bcher-kva.example"} {
		if err := CheckOrigin(o); err != nil {
			t.Errorf("CheckOrigin(%q) = %v, want nil", o, err)
		}
	}
	for o, want := range map[string]string{
		"":                            "it must be https://host",
		"*":                           "it must be https://host",
		"app.example.com":             "it must be https://host",
		"ftp://app.example.com":       "it must be https://host",
		"https://app.example.com/":    "no user, path, query or fragment (https://app.example.com)",
		"https://app.example.com/x":   "no user, path, query or fragment",
		"https://app.example.com?":    "no user, path, query or fragment",
		"https://app.example.com#":    "no user, path, query or fragment",
		"https://u@app.example.com":   "no user, path, query or fragment",
		"https://":                    "no user, path, query or fragment",
		"https://App.example.com":     `write it in lower case ("https://app.example.com")`,
		"https://app.example.com:0":   "port must be a number from 1 to 65535",
		"https://app.example.com:":    "port must be a number from 1 to 65535",
		"https://app.example.com:080": "port must be a number from 1 to 65535",
		"https://[zz]:1":              "is not an origin",
		"https://bücher.example":      "xn-- form",
		"https://a_b.example":         "characters a host name cannot have",
	} {
		err := CheckOrigin(o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckOrigin(%q) = %v, want an error containing %q", o, err, want)
		}
	}
}

func TestManifestCORSOrigins(t *testing.T) {
	for _, tc := range []struct {
		origins []string
		want    string
	}{
		{[]string{"https://app.example.com", "http://localhost:3000"}, ""},
		{[]string{"*"}, ""},
		{[]string{"*", "https://app.example.com"}, `http.cors_origins: "*" allows every origin; list it alone`},
		{[]string{"https://app.example.com", "https://app.example.com/"}, "http.cors_origins[1]: "},
	} {
		m := Manifest{Name: "t", Version: "1.0.0", ProtocolVersion: Version, HTTP: &HTTPSpec{CORSOrigins: tc.origins}}
		err := m.Check()
		switch {
		case tc.want == "" && err != nil && strings.Contains(err.Error(), "cors_origins"):
			t.Errorf("%q: %v, want no cors_origins error", tc.origins, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want an error containing %q", tc.origins, err, tc.want)
		}
	}
}

// FuzzCheckOrigin checks that every origin the rule accepts is exactly
// what a browser would send: scheme://host[:port], lower case, printable.
func FuzzCheckOrigin(f *testing.F) {
	for _, s := range []string{"https://app.example.com", "http://127.0.0.1:3000", "https://[::1]:1", "https://a/b", "HTTP://A", "https://a:99999", "https://a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, o string) {
		if CheckOrigin(o) != nil {
			return
		}
		u, err := url.Parse(o)
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", o, err)
		}
		if u.Scheme+"://"+u.Host != o || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("accepted %q, which is not scheme://host", o)
		}
		for _, r := range o {
			if !unicode.IsPrint(r) || unicode.IsSpace(r) || unicode.IsUpper(r) {
				t.Fatalf("accepted %q with %U", o, r)
			}
		}
	})
}
