package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// EgressAsk recognises an egress-ask slot: with [network] ask on, the box
// pushes one (renderer protocol.RendererEgressAsk) when an agent connects
// to a host no rule covers, and holds the connection until the client
// answers it with AnswerEgress or the ask's timeout denies it. ok is
// false for any other display event.
func EgressAsk(d DisplayEvent) (ask protocol.EgressAsk, ok bool) {
	if d.Kind != DisplayPush || d.Slot.Renderer != protocol.RendererEgressAsk {
		return ask, false
	}
	if json.Unmarshal(d.Slot.Input, &ask) != nil || ask.Host == "" {
		return ask, false
	}
	return ask, true
}

// AnswerEgress answers an egress-ask slot: protocol.EgressAskOnce (this
// connection), EgressAskSession (this host and port for the rest of the
// session), EgressAskBox (added to the box's live policy) or
// EgressAskDeny.
func (r *Result) AnswerEgress(ctx context.Context, slotID, answer string) error {
	if !slices.Contains(protocol.EgressAskChoices, answer) {
		return fmt.Errorf("answer egress ask %s: %q is not one of %v", slotID, answer, protocol.EgressAskChoices)
	}
	return r.Resolve(ctx, slotID, answer)
}

// EgressLogOptions choose what EgressLog reads.
type EgressLogOptions struct {
	// AfterSeq keeps the decisions numbered above it (the last one read).
	AfterSeq uint64
	// Since keeps the decisions made at or after it.
	Since time.Time
	// Session keeps one session's decisions.
	Session string
	// Follow keeps reading new decisions as the box makes them, until ctx
	// ends or the box closes.
	Follow bool
}

// EgressLog reads the box's egress audit trail (GET /egress/log; the key,
// or a token with the audit or admin scope): one decision of its egress
// proxy a line, oldest first. The sequence ends at the last decision
// kept (or, with Follow, when ctx ends or the box closes); a failure is
// its last element. A line the box adds when a follower fell behind has
// Seq 0 and says so in Reason.
func (b *Box) EgressLog(ctx context.Context, o EgressLogOptions) iter.Seq2[protocol.EgressEvent, error] {
	return func(yield func(protocol.EgressEvent, error) bool) {
		var zero protocol.EgressEvent
		u := b.route("egress/log")
		q := url.Values{}
		switch {
		case o.AfterSeq > 0:
			q.Set("since", strconv.FormatUint(o.AfterSeq, 10))
		case !o.Since.IsZero():
			q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
		}
		if o.Session != "" {
			q.Set("session", o.Session)
		}
		if o.Follow {
			q.Set("follow", "1")
		}
		u.RawQuery = q.Encode()
		err := b.jsonLines(ctx, u, "the egress log", func(line []byte) (bool, error) {
			var ev protocol.EgressEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				return false, fmt.Errorf("box %q: an egress log line is not a decision: %.80q", b.name, line)
			}
			return yield(ev, nil), nil
		})
		if err != nil {
			yield(zero, err)
		}
	}
}
