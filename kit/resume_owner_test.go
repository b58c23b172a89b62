package kit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A resume by another credential, or one asking for frames the session
// never sent, is refused and leaves the session and its socket alone.
func TestForeignAndFailedResumesLeaveTheSessionAlone(t *testing.T) {
	b := newBox(t, agent.Func(func(_ context.Context, turn agent.Turn) (string, error) { return "ran " + turn.Text(), nil }))
	mint := func(sub string) http.Header {
		tok, err := protocol.MintToken(b.key, protocol.TokenClaims{Scopes: []string{protocol.ScopeConnect}, Expires: time.Now().Add(time.Hour), Subject: sub})
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Authorization": {"Bearer " + tok}}
	}
	alice := mint("alice")
	victim := b.dial("/", alice)
	victim.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	sid := victim.hello["session_id"].(string)
	victim.prompt("1", "one")
	if m := last(victim.finish("1")); m["message"] != "ran one" {
		t.Fatalf("first prompt: %v", m)
	}

	for _, tc := range []struct {
		name   string
		header http.Header
		query  string
	}{
		{"the key", b.auth(), "/?resume=" + sid + "&last_seq=0"},
		{"a token of another subject", mint("mallory"), "/?resume=" + sid + "&last_seq=0"},
		{"a token without a subject", mint(""), "/?resume=" + sid + "&last_seq=0"},
		{"the owner, past the last frame", alice, "/?resume=" + sid + "&last_seq=999999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.dial(tc.query, tc.header)
			if a.hello["resumed"] == true || a.hello["session_id"] == sid {
				t.Errorf("hello = %v: the resume was accepted", a.hello)
			}
			if m := a.next(); errCode(m) != protocol.CodeResumeFailed {
				t.Errorf("first frame = %v, want ResumeFailed", m)
			}
			a.close()
			// The victim's socket still works, and its session goes on.
			victim.prompt(tc.name, "again")
			if m := last(victim.finish(tc.name)); m["message"] != "ran again" || m["seq"] == nil {
				t.Errorf("the victim's next prompt: %v", m)
			}
		})
	}

	// Another token of the owner's subject resumes it.
	victim.drop()
	c2 := b.dial("/?resume="+sid+"&last_seq=1", mint("alice"))
	if c2.hello["resumed"] != true || c2.hello["session_id"] != sid {
		t.Errorf("the owner's resume: hello %v", c2.hello)
	}
}
