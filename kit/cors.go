package kit

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// corsPolicy is [http] cors_origins: which web origins' pages may call the
// box's HTTP routes from a browser. The routes authenticate by the
// Authorization header alone, never by a cookie, so answering an origin
// gives its pages nothing they could not do with the token they hold;
// /inspect, whose session is a cookie, never answers cross-origin.
type corsPolicy struct {
	any     bool
	origins []string
}

// The request headers a page may send, the methods it may use, and the
// response headers it may read beyond the CORS-safelisted ones.
const (
	corsAllowHeaders  = "Authorization, Content-Type, Upload-Length, Upload-Offset, Cache-Control, Pragma"
	corsAllowMethods  = "GET, HEAD, POST, PUT, PATCH, DELETE"
	corsExposeHeaders = "Content-Disposition, Location, Retry-After, Upload-Length, Upload-Offset, WWW-Authenticate, Allow"
	corsMaxAge        = "600"
)

// corsAllowed lists corsAllowHeaders in lower case, for matching a
// preflight's Access-Control-Request-Headers.
var corsAllowed = strings.Split(strings.ToLower(strings.ReplaceAll(corsAllowHeaders, " ", "")), ",")

func newCORS(h *protocol.HTTPSpec) *corsPolicy {
	if h == nil || len(h.CORSOrigins) == 0 {
		return nil
	}
	return &corsPolicy{any: slices.Contains(h.CORSOrigins, "*"), origins: h.CORSOrigins}
}

func (p *corsPolicy) allows(origin string) bool {
	return p != nil && origin != "" && (p.any || slices.Contains(p.origins, origin))
}

// cors marks the answer to a cross-origin request from an allowed origin
// as readable by its page, and answers preflight requests. It reports
// whether it answered the request.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	inspect := isInspectPath(r.URL.Path)
	if !s.corsPolicy.allows(origin) || inspect {
		if !preflight {
			return false // served as usual; the browser keeps the answer from the page
		}
		why := "add it to cors_origins under [http] in glovebox.toml"
		if inspect {
			why = "the inspector answers its own origin only"
		}
		s.log.Debug("cross-origin preflight refused", "origin", origin, "path", r.URL.Path)
		corsRefuse(w, "origin "+strconv.Quote(origin)+" may not call this box from a browser: "+why)
		return true
	}
	if preflight {
		for _, name := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !slices.Contains(corsAllowed, name) {
				corsRefuse(w, "a page may not send the header "+strconv.Quote(name)+" to this box; it takes "+corsAllowHeaders)
				return true
			}
		}
	}
	if s.corsPolicy.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if !preflight {
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return false
	}
	h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
	h.Set("Access-Control-Allow-Methods", corsAllowMethods)
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	h.Set("Content-Length", "0")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// corsRefuse answers a preflight with a 403 that says why, for the
// browser's network panel: the page itself only sees that it failed.
func corsRefuse(w http.ResponseWriter, why string) {
	msg := "glovebox: " + why + "\n"
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(msg)))
	w.WriteHeader(http.StatusForbidden)
	w.Write([]byte(msg))
}
