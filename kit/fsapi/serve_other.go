//go:build !linux

package fsapi

import (
	"io"
	"net/http"
)

// Serve answers 501: a session's files are served on Linux only (the
// session helper is).
func (sv *Server) Serve(w http.ResponseWriter, r *http.Request, s Session, rest string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotImplemented)
	io.WriteString(w, "a session's files are served by kits on Linux only\n")
}
