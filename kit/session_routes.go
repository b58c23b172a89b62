package kit

import (
	"net/http"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A session's own routes are /sessions/{id}/{feature}[/{rest}]: the
// session's terminals, processes, files and preview ports. sessionRoutes
// finds the session and checks the credential once for all of them, then
// hands the request to the feature.
//
// Auth: the key; a token with the feature's scope, or the admin scope
// (every session); or a connect-scope token of the identity that opened
// the session (its own credential: the same token, or a token of the
// same subject). Anything else gets 401 with an empty body, as a wrong
// key does; a session that does not exist, or that this credential may
// not reach, gets 404 only once the credential is good for some session,
// so that a stranger learns nothing of which ids exist.

// sessionFeature is one feature under /sessions/{id}/.
type sessionFeature struct {
	name  string // the path segment after the id: "terminals"
	scope string // the token scope that reaches every session's
	// serve answers the request; rest is the path after the feature's
	// name ("" or "/..."), never unescaped.
	serve func(w http.ResponseWriter, r *http.Request, ss *session, rest string)
}

// sessionRoutes serves /sessions/{id}/{feature}... for its features.
type sessionRoutes struct {
	auth     *auth
	live     *live
	features []sessionFeature
}

func (sr *sessionRoutes) routes() []route.Route {
	return []route.Route{{
		Match: func(r *http.Request) bool {
			_, name, _, ok := splitSessionPath(r.URL.Path)
			return ok && sr.feature(name) != nil
		},
		Serve: sr.serve,
	}}
}

func (sr *sessionRoutes) feature(name string) *sessionFeature {
	for i := range sr.features {
		if sr.features[i].name == name {
			return &sr.features[i]
		}
	}
	return nil
}

// splitSessionPath splits /sessions/{id}/{feature}{rest}.
func splitSessionPath(p string) (id, feature, rest string, ok bool) {
	p, ok = strings.CutPrefix(p, "/sessions/")
	if !ok {
		return "", "", "", false
	}
	id, p, ok = strings.Cut(p, "/")
	if !ok || id == "" {
		return "", "", "", false
	}
	feature, rest = p, ""
	if i := strings.IndexByte(p, '/'); i >= 0 {
		feature, rest = p[:i], p[i:]
	}
	return id, feature, rest, feature != ""
}

func (sr *sessionRoutes) serve(w http.ResponseWriter, r *http.Request) {
	id, name, rest, _ := splitSessionPath(r.URL.Path)
	f := sr.feature(name)
	may, ok := sr.reach(r, f.scope)
	if !ok {
		route.Unauthorized(w)
		return
	}
	ss := sr.live.lookup(id)
	if ss == nil || !ss.opened.Load() || !may(ss.owner) {
		http.Error(w, "no session "+id+" on this box that this credential may reach (GET /sessions lists them)", http.StatusNotFound)
		return
	}
	// In use while the request lasts (a terminal's WebSocket, a file
	// streamed, a watch): not paused under it, and woken for it.
	defer ss.inUse()()
	if err := ss.wake(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	f.serve(w, r, ss, rest)
}

// reach judges a request's bearer for a feature of scope: may reports
// whether it reaches a session opened by owner. A WebSocket upgrade may
// carry its bearer as a subprotocol, as the session's own does.
func (sr *sessionRoutes) reach(r *http.Request, scope string) (may func(owner string) bool, ok bool) {
	bearer, present := route.Bearer(r)
	if !present {
		bearer, present = bearerSubprotocol(r)
	}
	if !present {
		return nil, false
	}
	all := func(string) bool { return true }
	if sr.auth.isKey(bearer) {
		return all, true
	}
	c, valid := sr.auth.tokenClaims(bearer)
	switch {
	case !valid:
		return nil, false
	case c.Allows(scope) || c.Allows(protocol.ScopeAdmin):
		return all, true
	case c.Allows(protocol.ScopeConnect):
		id := identity(bearer, c, false)
		return func(owner string) bool { return owner == id }, true
	}
	return nil, false
}
