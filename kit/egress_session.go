package kit

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A session's own egress rules. The app that opens a session may narrow
// its egress, or widen it as far as the box's [network]
// session_may_allow lets it (see egress.rules for the exact meaning):
// when it opens (ClientHello.Egress), during it (an egress frame), or
// from outside (POST /sessions/{id}/egress, admin). New connections and
// requests of the session's agents follow the rules at once; the box
// answers a frame with the session's effective policy (an egress frame),
// and the session's hello reports it too.

// errNoEgress answers session rules on a box without an egress proxy.
var errNoEgress = errors.New("this box has no egress proxy, so there is no egress to narrow: add a [network] table to glovebox.toml")

// setEgress replaces the session's own rules and returns its effective
// policy.
func (ss *session) setEgress(spec protocol.NetworkSpec) (*protocol.EgressEnvironment, error) {
	e := ss.srv.egress
	if e == nil {
		return nil, errNoEgress
	}
	pol, err := egress.NewSessionPolicy(spec)
	if err != nil {
		return nil, err
	}
	ss.egressRules.Set(pol)
	ss.logger().Warn("session egress rules set", "default", spec.Default, "allow", spec.Allow, "deny", spec.Deny, "allow_requests", len(spec.AllowRequests))
	return ss.egressView(), nil
}

// egressView is the session's effective egress policy: the box's, with
// the session's own rules (nil without a proxy).
func (ss *session) egressView() *protocol.EgressEnvironment {
	e := ss.srv.egress
	if e == nil {
		return nil
	}
	v := e.view()
	if p := ss.egressRules.Get(); p != nil {
		spec := p.Spec()
		v.Session = &spec
	}
	return v
}

// egressFrame sets the session's rules from a frame and answers with an
// egress frame.
func (ss *session) egressFrame(c *conn, spec protocol.NetworkSpec) {
	v, err := ss.setEgress(spec)
	ans := &protocol.EgressPolicy{Policy: v}
	if err != nil {
		ans = &protocol.EgressPolicy{Error: err.Error(), Policy: ss.egressView()}
	}
	b, _ := protocol.Encode(ans)
	c.send(b)
}

// serveSessionEgress is GET (the session's effective policy) and POST or
// PUT (replace its own rules with the JSON body {"default","allow",
// "deny","allow_requests"}) of /sessions/{id}/egress, admin only.
func (er *egressRoutes) serveSessionEgress(w http.ResponseWriter, r *http.Request, id string) {
	if !er.auth.Admit(w, r, protocol.ScopeAdmin) {
		return
	}
	if er.e == nil {
		http.Error(w, errNoEgress.Error(), http.StatusNotFound)
		return
	}
	ss := er.live.lookup(id)
	if ss == nil || !ss.opened.Load() {
		http.Error(w, "no session "+id+" on this box (GET /sessions lists them)", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost, http.MethodPut:
		spec, ok := readNetworkSpec(w, r, "rules")
		if !ok {
			return
		}
		if _, err := ss.setEgress(spec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	default:
		route.MethodNotAllowed(w, "GET, HEAD, POST, PUT")
		return
	}
	out, _ := json.Marshal(ss.egressView())
	route.JSON(w, r, out)
}
