package kit

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// GET /files lists the files parked in the box's own store as a
// protocol.FileList; DELETE /files/{id} removes one (204, or 404). Both
// take the key, an admin token, or a files token not limited to some ids
// (one limited to some may only read those).

// fileRoutes serve the box's own file store: GET /files/{id} for a
// download, GET /files and DELETE /files/{id} for its operator.
type fileRoutes struct {
	auth  *auth
	local *localStore
	log   *slog.Logger
}

func (fr *fileRoutes) routes() []route.Route {
	isFile := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/files/") }
	return []route.Route{
		route.Path("/files", fr.serveList),
		{Match: func(r *http.Request) bool { return isFile(r) && r.Method == http.MethodDelete }, Serve: func(w http.ResponseWriter, r *http.Request) {
			fr.serveDelete(w, r, strings.TrimPrefix(r.URL.Path, "/files/"))
		}},
		route.Prefix("/files/", fr.serveFile),
	}
}

func (fr *fileRoutes) serveFile(w http.ResponseWriter, r *http.Request, id string) {
	if !storage.ValidID(id) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !fr.auth.fileAuthorized(r, id) {
		route.Unauthorized(w)
		return
	}
	fr.local.ServeHTTP(w, r)
}

// admitFileAdmin admits the key, an admin token, or a files token not
// limited to some ids (see admitClaims).
func (fr *fileRoutes) admitFileAdmin(w http.ResponseWriter, r *http.Request) bool {
	return fr.auth.AdmitClaims(w, r, func(c protocol.TokenClaims) bool {
		return c.Allows(protocol.ScopeAdmin) || (c.Allows(protocol.ScopeFiles) && len(c.Files) == 0)
	})
}

func (fr *fileRoutes) serveList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !fr.admitFileAdmin(w, r) {
		return
	}
	l, err := fr.local.get(r.Context())
	if err != nil {
		http.Error(w, "the file store is not available: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	files, err := l.List(r.Context())
	if err != nil {
		fr.log.Error("list files", "err", err)
		http.Error(w, "listing the file store failed", http.StatusInternalServerError)
		return
	}
	for i := range files {
		files[i].ID = fr.local.publicID(files[i].ID)
	}
	body, _ := json.Marshal(protocol.FileList{Files: files})
	route.JSON(w, r, body)
}

func (fr *fileRoutes) serveDelete(w http.ResponseWriter, r *http.Request, id string) {
	if !storage.ValidID(id) {
		http.NotFound(w, r)
		return
	}
	if !fr.admitFileAdmin(w, r) {
		return
	}
	l, err := fr.local.get(r.Context())
	if err != nil {
		http.Error(w, "the file store is not available: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	local := fr.local.localID(id)
	if local == "" {
		http.NotFound(w, r)
		return
	}
	switch err := l.Remove(r.Context(), local); {
	case errors.Is(err, storage.ErrNotFound):
		http.NotFound(w, r)
	case err != nil:
		fr.log.Error("delete file", "id", id, "err", err)
		http.Error(w, "deleting the file failed", http.StatusInternalServerError)
	default:
		fr.log.Info("file deleted", "id", id)
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
