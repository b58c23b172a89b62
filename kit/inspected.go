package kit

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/inspect"
)

// inspected shows the live sessions to the inspector (kit/inspect): what
// it lists, streams, answers and aborts.
type inspected struct{ live *live }

var (
	_ inspect.Sessions  = inspected{}
	_ inspect.Session   = inspectedSession{}
	_ inspect.Terminals = inspectedTerminals{}
)

func (i inspected) All() []inspect.Session {
	all := i.live.all()
	out := make([]inspect.Session, len(all))
	for j, ss := range all {
		out[j] = inspectedSession{ss}
	}
	return out
}

func (i inspected) Lookup(id string) inspect.Session {
	ss := i.live.lookup(id)
	if ss == nil {
		return nil
	}
	return inspectedSession{ss}
}

// inspectedSession is one live session as the inspector sees it.
type inspectedSession struct{ ss *session }

func (i inspectedSession) Row() inspect.SessionRow {
	ss := i.ss
	res, _ := ss.obs.resources()
	return inspect.SessionRow{
		Resources: res,
		ID:        ss.id, Owner: ownerLabel(ss.owner), Started: ss.obs.started.UTC(),
		Connected: ss.stream.conn.Load() != nil, LastSeq: ss.stream.lastSeq.Load(),
		Paused: ss.paused(), Persistent: ss.persistent(),
		Prompts: ss.obs.promptList(),
	}
}

func (i inspectedSession) Prompts() []inspect.PromptInfo { return i.ss.obs.promptList() }

func (i inspectedSession) Subscribe() (past [][]byte, frames <-chan []byte, stop func(), ok bool) {
	past, ch, ok := i.ss.obs.subscribe()
	return past, ch, func() { i.ss.obs.unsubscribe(ch) }, ok
}

func (i inspectedSession) Ended() bool { return i.ss.ctx.Err() != nil }

func (i inspectedSession) Answer(slotID string, value json.RawMessage, reject *string) bool {
	sl := i.ss.slots.get(slotID)
	if sl == nil || sl.wait == nil {
		return false
	}
	if reject != nil {
		reason, _ := json.Marshal(*reject)
		i.ss.slots.settle(slotID, slotResult{rejected: true, value: reason})
	} else {
		i.ss.slots.settle(slotID, slotResult{value: value})
	}
	return true
}

func (i inspectedSession) Abort(promptID string) bool {
	if !i.ss.prompts.abort(promptID) {
		return false
	}
	i.ss.logger().Info("prompt aborted from the inspector", "id", promptID)
	return true
}

// inspectedTerminals opens the sessions' terminals (terminal.go) for the
// inspector's page, which has checked the login's grant: the same
// terminals, limits and sandbox as /sessions/{id}/terminals.
type inspectedTerminals struct{ s *Server }

func (i inspectedTerminals) ServeTerminals(w http.ResponseWriter, r *http.Request, id, rest string) {
	ss := i.s.live.lookup(id)
	if ss == nil || !ss.opened.Load() || i.s.terms == nil {
		http.Error(w, "inspect: no live session "+id+" on this box", http.StatusNotFound)
		return
	}
	i.s.terms.serve(w, r, ss, rest)
}

// inspectOptions are what the inspector reads of the box s: its history
// goes under the state directory when that is usable.
func (b *boot) inspectOptions(s *Server, now func() time.Time) inspect.Options {
	o := inspect.Options{
		Sessions: inspected{&s.live}, Grant: s.auth.inspectGrant, Files: s.local,
		Terminals:   inspectedTerminals{s},
		Environment: s.environmentBody, Now: now, Done: s.ctx.Done(), Log: s.log,
	}
	if dirOK(s.stateDir) {
		o.Dir = filepath.Join(s.stateDir, "inspect")
	}
	if sn := s.snaps; sn != nil {
		o.Snapshots = func(ctx context.Context) ([]byte, error) {
			l, err := sn.list(ctx)
			if err != nil {
				return nil, err
			}
			return json.Marshal(l)
		}
	}
	if e := s.egress; e != nil && e.audit != nil {
		o.Audit = func(q egress.Query) ([][]byte, error) {
			lines, _, err := e.audit.Since(q)
			return lines, err
		}
	}
	return o
}

// inspectRecord is the ended session as the inspector's history keeps it.
func (ss *session) inspectRecord(cause error) inspect.SessionRecord {
	_, peaks := ss.obs.resources()
	return inspect.SessionRecord{
		Peaks: peaks,
		ID:    ss.id, Owner: ownerLabel(ss.owner), Started: ss.obs.started.UTC(), Ended: time.Now().UTC(),
		Cause: closeCause(cause), Frames: ss.framesSent.Load(), Bytes: ss.bytesSent.Load(),
		Prompts: ss.obs.promptList(),
	}
}

// ownerLabel says whose a session is without naming a secret.
func ownerLabel(owner string) string {
	switch {
	case strings.HasPrefix(owner, "sub:"):
		return "subject " + strings.TrimPrefix(owner, "sub:")
	case strings.HasPrefix(owner, "token:"):
		return "token"
	}
	return owner
}
