package kit

import (
	"net/http"

	"github.com/glovebox-dev/glovebox/kit/cors"
	"github.com/glovebox-dev/glovebox/kit/route"
)

// handler is the box's http.Handler: CORS first, then Fly's replay of a
// request meant for another machine, then the first of the routes (mounted
// at boot, in order) that matches.
type handler struct {
	cors    *cors.Policy
	machine string // FLY_MACHINE_ID, when on Fly (fly.go)
	// preview takes every request to a host under the preview domain,
	// before anything else: those hosts serve sessions' ports, never the
	// box's routes (preview.go).
	preview *previews
	routes  []route.Route
	// health answers what a gate refuses while the box is over its
	// connection cap (listen.go).
	health http.HandlerFunc
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.preview != nil && h.preview.serveHost(w, r) {
		return
	}
	if h.cors.Handle(w, r) {
		return
	}
	if replayElsewhere(w, r, h.machine) {
		return
	}
	for _, rt := range h.routes {
		if rt.Match(r) {
			rt.Serve(w, r)
			return
		}
	}
	http.NotFound(w, r)
}
