package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// RendererEgressAsk is the renderer of the display slot the kit pushes
// when [network] ask is on and an agent connects to a host no rule
// covers. Its input is an EgressAsk; the client answers with
// display_resolve and one of the EgressAsk* strings as the value (or an
// object {"answer": "..."}), or display_reject, which denies. The slot
// is cleared when it is answered or its timeout denies it.
const RendererEgressAsk = "glovebox.egress_ask"

// Answers to an egress ask.
const (
	EgressAskOnce    = "once"    // this connection only
	EgressAskSession = "session" // this host and port, for the rest of the session
	EgressAskBox     = "box"     // added to the box's live policy at once
	EgressAskDeny    = "deny"
	// EgressAskTimeout is what the audit trail records when no answer
	// came in time (the connection is denied); a client never sends it.
	EgressAskTimeout = "timeout"
)

// EgressAskChoices are the answers a client may give, in the order to
// offer them.
var EgressAskChoices = []string{EgressAskOnce, EgressAskSession, EgressAskBox, EgressAskDeny}

// DefaultAskTimeout bounds an ask when [network] ask_timeout is not set.
const DefaultAskTimeout = 60 * time.Second

// EgressAsk is the input of an egress-ask slot.
type EgressAsk struct {
	// Message is the question in a sentence ("the agent wants
	// api.github.com:443").
	Message string `json:"message"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	// Choices are EgressAskChoices.
	Choices []string `json:"choices"`
	// Line is the glovebox.toml line an approval for the box adds.
	Line string `json:"line"`
	// TimeoutMS is how long the kit waits before it denies.
	TimeoutMS int64 `json:"timeout_ms"`
}

// ParseEgressAskAnswer reads a display_resolve value answering an
// egress ask: "once", "session", "box" or "deny", as a JSON string or
// {"answer": "..."}.
func ParseEgressAskAnswer(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		var o struct {
			Answer string `json:"answer"`
		}
		if err := json.Unmarshal(v, &o); err != nil {
			return "", fmt.Errorf("egress ask answer %.40q: want one of %s, as a JSON string", v, strings.Join(EgressAskChoices, ", "))
		}
		s = o.Answer
	}
	for _, c := range EgressAskChoices {
		if s == c {
			return s, nil
		}
	}
	return "", fmt.Errorf("egress ask answer %.40q: want one of %s", s, strings.Join(EgressAskChoices, ", "))
}
