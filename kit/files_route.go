package kit

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// GET /files lists the files parked in the box's own store as a
// protocol.FileList; DELETE /files/{id} removes one (204, or 404). Both
// take the key, an admin token, or a files token not limited to some ids
// (one limited to some may only read those).

// admitFileAdmin admits the key, an admin token, or a files token not
// limited to some ids (see admitClaims).
func (s *Server) admitFileAdmin(w http.ResponseWriter, r *http.Request) bool {
	return s.auth.AdmitClaims(w, r, func(c protocol.TokenClaims) bool {
		return c.Allows(protocol.ScopeAdmin) || (c.Allows(protocol.ScopeFiles) && len(c.Files) == 0)
	})
}

func (s *Server) serveFileList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !s.admitFileAdmin(w, r) {
		return
	}
	l, err := s.local.get(r.Context())
	if err != nil {
		http.Error(w, "the file store is not available: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	files, err := l.List(r.Context())
	if err != nil {
		s.log.Error("list files", "err", err)
		http.Error(w, "listing the file store failed", http.StatusInternalServerError)
		return
	}
	for i := range files {
		files[i].ID = s.local.publicID(files[i].ID)
	}
	body, _ := json.Marshal(protocol.FileList{Files: files})
	route.JSON(w, r, body)
}

func (s *Server) serveFileDelete(w http.ResponseWriter, r *http.Request, id string) {
	if !storage.ValidID(id) {
		http.NotFound(w, r)
		return
	}
	if !s.admitFileAdmin(w, r) {
		return
	}
	l, err := s.local.get(r.Context())
	if err != nil {
		http.Error(w, "the file store is not available: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	local := s.local.localID(id)
	if local == "" {
		http.NotFound(w, r)
		return
	}
	switch err := l.Remove(r.Context(), local); {
	case errors.Is(err, storage.ErrNotFound):
		http.NotFound(w, r)
	case err != nil:
		s.log.Error("delete file", "id", id, "err", err)
		http.Error(w, "deleting the file failed", http.StatusInternalServerError)
	default:
		s.log.Info("file deleted", "id", id)
		w.WriteHeader(http.StatusNoContent)
	}
}

// publicID is the id clients know a file of this machine's store by.
func (ls *localStore) publicID(local string) string {
	if ls.machine == "" {
		return local
	}
	return ls.machine + "_" + local
}
