package kit

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// GET /runs/{prompt} answers the latest signed record (protocol.SignedRun)
// of a prompt id, ?session=ID narrowing it to one session's; GET
// /runs?session=ID answers the session's chain (protocol.RunChain), in
// order. Auth: the key, a token with the runs or admin scope (every
// record), or one with the connect scope (the records of the sessions
// opened by the same credential: the same token, or a token of the same
// subject). A record whose prompt has ended but which is still being
// signed is waited for, up to runsWait.

// runsWait bounds how long a request waits for a record being signed.
const runsWait = 10 * time.Second

// runsRoute serves GET /runs and GET /runs/{prompt}.
type runsRoute struct {
	auth *auth
	runs *runRecorder
	init func() // makes runs ready (runRecorder.init), once
}

func (rt *runsRoute) routes() []route.Route {
	return []route.Route{
		route.Path("/runs", func(w http.ResponseWriter, r *http.Request) { rt.serve(w, r, "") }),
		route.Prefix("/runs/", rt.serve),
	}
}

func (rt *runsRoute) serve(w http.ResponseWriter, r *http.Request, prompt string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	may, ok := rt.reader(r)
	if !ok {
		route.Unauthorized(w)
		return
	}
	session := r.URL.Query().Get("session")
	if prompt == "" && session == "" {
		http.Error(w, "runs: give a session (GET /runs?session=ID) or a prompt id (GET /runs/{prompt})", http.StatusBadRequest)
		return
	}
	rt.init()
	bodies := rt.runs.wait(r, session, prompt, may)
	if prompt != "" {
		if len(bodies) == 0 {
			http.Error(w, "runs: no record of prompt "+prompt+" that this credential may read", http.StatusNotFound)
			return
		}
		route.JSON(w, r, bodies[len(bodies)-1])
		return
	}
	if len(bodies) == 0 {
		http.Error(w, "runs: no records of session "+session+" that this credential may read", http.StatusNotFound)
		return
	}
	chain := protocol.RunChain{Session: session, Records: make([]protocol.SignedRun, len(bodies))}
	for i, b := range bodies {
		json.Unmarshal(b, &chain.Records[i])
	}
	body, _ := json.Marshal(chain)
	route.JSON(w, r, body)
}

// reader judges a /runs request's bearer: may reports whether it may
// read the records of a session opened by owner.
func (rt *runsRoute) reader(r *http.Request) (may func(owner string) bool, ok bool) {
	bearer, present := route.Bearer(r)
	if !present {
		return nil, false
	}
	all := func(string) bool { return true }
	if rt.auth.isKey(bearer) {
		return all, true
	}
	c, valid := rt.auth.tokenClaims(bearer)
	switch {
	case !valid:
		return nil, false
	case c.Allows(protocol.ScopeRuns) || c.Allows(protocol.ScopeAdmin):
		return all, true
	case c.Allows(protocol.ScopeConnect):
		id := identity(bearer, c, false)
		return func(owner string) bool { return owner == id }, true
	}
	return nil, false
}

// wait returns the records find selects once none of them is still being
// signed (or runsWait has passed, or the client left).
func (rr *runRecorder) wait(r *http.Request, session, prompt string, may func(string) bool) [][]byte {
	t := time.NewTimer(runsWait)
	defer t.Stop()
	for {
		bodies, pending := rr.find(session, prompt, may)
		if len(pending) == 0 {
			return bodies
		}
		select {
		case <-pending[0]:
		case <-t.C:
			return bodies
		case <-r.Context().Done():
			return bodies
		}
	}
}

// find returns one session's records in order (prompt ""), or the
// records of a prompt id, oldest first, in one session or all; and the
// drafts among them still being signed.
func (rr *runRecorder) find(session, prompt string, may func(owner string) bool) (bodies [][]byte, pending []chan struct{}) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var hits []runEntry
	for id, c := range rr.chains {
		if session != "" && id != session || !may(c.owner) {
			continue
		}
		for _, d := range c.pending {
			if prompt == "" || d.rec.Prompt == prompt {
				pending = append(pending, d.done)
			}
		}
		for _, e := range c.records {
			if prompt == "" || e.prompt == prompt {
				hits = append(hits, e)
			}
		}
	}
	slices.SortStableFunc(hits, func(a, b runEntry) int { return a.ended.Compare(b.ended) })
	for _, h := range hits {
		bodies = append(bodies, h.body)
	}
	return bodies, pending
}
