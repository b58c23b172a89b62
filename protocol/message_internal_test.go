package protocol

import (
	"encoding/json"
	"testing"
)

// FuzzFastFields: the decoder's shortcuts for plain strings and plain
// unsigned integers give exactly what the JSON decoder gives, for every
// JSON value.
func FuzzFastFields(f *testing.F) {
	for _, s := range []string{`"abc"`, `""`, `"a\"b"`, `"\u00e9"`, "\"\xff\"", `"é"`, `0`, `7`, `18446744073709551615`,
		`18446744073709551616`, `-1`, `1.0`, `1e3`, `null`, `true`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		if s, ok := plainString(raw); ok {
			var want string
			if err := json.Unmarshal(raw, &want); err != nil || s != want {
				t.Fatalf("plainString(%q) = %q; the JSON decoder gives %q, %v", raw, s, want, err)
			}
		}
		got, err := rawUint(raw, "event")
		var want uint64
		werr := json.Unmarshal(raw, &want)
		if (err == nil) != (werr == nil) || got != want {
			t.Fatalf("rawUint(%q) = %d, %v; the JSON decoder gives %d, %v", raw, got, err, want, werr)
		}
	})
}
