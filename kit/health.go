package kit

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// livePath is the liveness probe: 200 while the kit serves HTTP, draining
// included. /health is readiness: 503 while the box drains, so that load
// balancers move away, which a liveness probe must not read as a hung box
// to restart in the middle of its drain.
const livePath = "/health/live"

// health answers /health, /health/live and /environment from bodies made
// at boot; while the box drains, /health says so.
type health struct {
	auth                 *auth
	drain                *drain
	body, authBody       []byte        // /health for anyone (nothing about the sandbox), for the key or a token
	drainBody, drainAuth []byte        // the same while the box drains
	environment          func() []byte // GET /environment's body
	live                 *live         // the sessions of /environment?session=ID
}

func (h *health) routes() []route.Route {
	return []route.Route{
		{Match: func(r *http.Request) bool { return r.URL.Path == "/health" || r.URL.Path == livePath }, Serve: h.serve},
		route.Path("/environment", h.serveEnvironment),
	}
}

func (h *health) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	// Anyone may ask whether the box is up; only the key or a token
	// learns its sandbox's layers and gaps.
	auth := false
	if _, ok := route.Bearer(r); ok {
		auth = h.auth.allows(r, func(protocol.TokenClaims) bool { return true })
	}
	body, status := h.body, http.StatusOK
	if auth {
		body = h.authBody
	}
	if h.drain.draining.Load() {
		body = h.drainBody
		if auth {
			body = h.drainAuth
		}
		if r.URL.Path != livePath {
			status = http.StatusServiceUnavailable
		}
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	w.Write(body)
}

func (h *health) serveEnvironment(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !h.auth.Admit(w, r, protocol.ScopeEnvironment) {
		return
	}
	if id := r.URL.Query().Get("session"); id != "" {
		h.sessionEnvironment(w, r, id)
		return
	}
	route.JSON(w, r, h.environment())
}

// sessionEnvironment is GET /environment?session=ID: the environment with
// the session's effective egress policy under "network". The key and
// admin tokens see any session; another credential only a session it
// opened (the same token, or a token for the same subject).
func (h *health) sessionEnvironment(w http.ResponseWriter, r *http.Request, id string) {
	bearer, _ := route.Bearer(r)
	ss := h.live.lookup(id)
	mine := false
	if ss != nil && ss.opened.Load() {
		if h.auth.isKey(bearer) {
			mine = true
		} else if c, ok := h.auth.tokenClaims(bearer); ok {
			mine = c.Allows(protocol.ScopeAdmin) || identity(bearer, c, false) == ss.owner
		}
	}
	if !mine {
		http.Error(w, "no session "+id+" of this credential on this box", http.StatusNotFound)
		return
	}
	var env protocol.Environment
	if err := json.Unmarshal(h.environment(), &env); err != nil {
		http.Error(w, "the environment does not decode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	env.Network = ss.egressView()
	out, _ := json.Marshal(env)
	route.JSON(w, r, out)
}
