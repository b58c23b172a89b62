package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParseEgressAskAnswer(t *testing.T) {
	for in, want := range map[string]string{`"once"`: "once", `"session"`: "session", `{"answer":"box"}`: "box", `"deny"`: "deny"} {
		if got, err := ParseEgressAskAnswer(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`"timeout"`, `"ONCE"`, `true`, `{"answer":1}`, `null`, ``, `"allow"`} {
		if got, err := ParseEgressAskAnswer(json.RawMessage(in)); err == nil || !strings.Contains(err.Error(), "want one of once, session, box, deny") {
			t.Errorf("%s: %q, %v; want an error naming the choices", in, got, err)
		}
	}
}

func FuzzParseEgressAskAnswer(f *testing.F) {
	for _, s := range []string{`"once"`, `{"answer":"box"}`, `"x"`, `[]`, `{"answer":"session","x":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseEgressAskAnswer(json.RawMessage(in))
		if err == nil && !slices.Contains(EgressAskChoices, got) {
			t.Fatalf("%q accepted as %q", in, got)
		}
	})
}
