package kit

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// GET /sessions lists the box's live sessions as a protocol.SessionList,
// oldest first, to the key or an admin token: id, owner, created, last
// activity, state, the running prompt's id and how long it has run, and
// the queue depth. Nothing of a prompt's text or of a session's files.

// sessionsRoute serves GET /sessions.
type sessionsRoute struct {
	auth *auth
	live *live
}

func (sr *sessionsRoute) routes() []route.Route {
	return []route.Route{route.Path("/sessions", sr.serve)}
}

func (sr *sessionsRoute) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !sr.auth.Admit(w, r, protocol.ScopeAdmin) {
		return
	}
	body, _ := json.Marshal(protocol.SessionList{Sessions: sessionInfos(sr.live.all(), time.Now())})
	route.JSON(w, r, body)
}

// sessionInfos describes the opened sessions among sessions at now,
// oldest first.
func sessionInfos(sessions []*session, now time.Time) []protocol.SessionInfo {
	out := make([]protocol.SessionInfo, 0, len(sessions))
	for _, ss := range sessions {
		if !ss.opened.Load() {
			continue
		}
		out = append(out, ss.describeSession(now))
	}
	slices.SortFunc(out, func(a, b protocol.SessionInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func (ss *session) describeSession(now time.Time) protocol.SessionInfo {
	info := protocol.SessionInfo{
		ID:           ss.id,
		Owner:        ss.owner,
		Created:      ss.created.UTC(),
		LastActivity: time.Unix(0, ss.lastActive.Load()).UTC(),
		State:        protocol.SessionIdle,
		Prompts:      ss.promptsRun.Load(),
	}
	info.Persistent = ss.persistent()
	queued, p := ss.prompts.load()
	info.Queued = queued
	if p != nil {
		info.State = protocol.SessionRunning
		info.Running = &protocol.RunningPrompt{ID: p.msg.ID, Started: p.started.UTC(), DurationMS: now.Sub(p.started).Milliseconds()}
	}
	if ss.stream.conn.Load() == nil {
		info.State = protocol.SessionDetached
		if box := ss.obs.box.Load(); box != nil && box.Paused() {
			info.State = protocol.SessionPaused
		}
	}
	return info
}
