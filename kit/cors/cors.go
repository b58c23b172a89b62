// Package cors answers browsers' cross-origin requests to a box:
// [http] cors_origins in glovebox.toml names the web origins whose pages
// may call its HTTP routes; preflights from other origins get a 403 that
// says why.
package cors

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Policy is [http] cors_origins: which web origins' pages may call the
// box's HTTP routes from a browser. The routes authenticate by the
// Authorization header alone, never by a cookie, so answering an origin
// gives its pages nothing they could not do with the token they hold;
// the inspector, whose session is a cookie, never answers cross-origin.
type Policy struct {
	any       bool
	origins   []string
	inspector func(path string) bool // the inspector's paths
	log       *slog.Logger
}

// The request headers a page may send, the methods it may use, and the
// response headers it may read beyond the CORS-safelisted ones.
const (
	allowHeaders  = "Authorization, Content-Type, Upload-Length, Upload-Offset, Cache-Control, Pragma"
	allowMethods  = "GET, HEAD, POST, PUT, PATCH, DELETE"
	exposeHeaders = "Content-Disposition, Location, Retry-After, Upload-Length, Upload-Offset, WWW-Authenticate, Allow"
	maxAge        = "600"
)

// allowed lists allowHeaders in lower case, for matching a
// preflight's Access-Control-Request-Headers.
var allowed = strings.Split(strings.ToLower(strings.ReplaceAll(allowHeaders, " ", "")), ",")

// New returns the policy of h (nil: no origin may call), under which the
// paths inspector reports answer their own origin only.
func New(h *protocol.HTTPSpec, inspector func(path string) bool, log *slog.Logger) *Policy {
	p := &Policy{inspector: inspector, log: log}
	if h != nil {
		p.any, p.origins = slices.Contains(h.CORSOrigins, "*"), h.CORSOrigins
	}
	return p
}

func (p *Policy) allows(origin string) bool {
	return origin != "" && (p.any || slices.Contains(p.origins, origin))
}

// Handle marks the answer to a cross-origin request from an allowed origin
// as readable by its page, and answers preflight requests. It reports
// whether it answered the request.
func (p *Policy) Handle(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	inspect := p.inspector(r.URL.Path)
	if !p.allows(origin) || inspect {
		if !preflight {
			return false // served as usual; the browser keeps the answer from the page
		}
		why := "add it to cors_origins under [http] in glovebox.toml"
		if inspect {
			why = "the inspector answers its own origin only"
		}
		p.log.Debug("cross-origin preflight refused", "origin", origin, "path", r.URL.Path)
		refuse(w, "origin "+strconv.Quote(origin)+" may not call this box from a browser: "+why)
		return true
	}
	if preflight {
		for _, name := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !slices.Contains(allowed, name) {
				refuse(w, "a page may not send the header "+strconv.Quote(name)+" to this box; it takes "+allowHeaders)
				return true
			}
		}
	}
	if p.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if !preflight {
		h.Set("Access-Control-Expose-Headers", exposeHeaders)
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", allowMethods)
	h.Set("Access-Control-Allow-Headers", allowHeaders)
	h.Set("Access-Control-Max-Age", maxAge)
	h.Set("Content-Length", "0")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// corsRefuse answers a preflight with a 403 that says why, for the
// browser's network panel: the page itself only sees that it failed.
func refuse(w http.ResponseWriter, why string) {
	msg := "glovebox: " + why + "\n"
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(msg))
}
