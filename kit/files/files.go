// Package files serves the box's own file store over HTTP:
//
//	GET|HEAD /files/{id}   a parked file, for the key or a files token (also in ?token=)
//	GET|HEAD /files        the parked files as a protocol.FileList
//	DELETE /files/{id}     removes one (204, or 404)
//
// The list and DELETE take the key, an admin token, or a files token not
// limited to some ids (one limited to some may only read those).
package files

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Store is the box's own file store as the routes see it.
type Store interface {
	// ServeHTTP answers GET or HEAD /files/{id}, once the id is valid
	// and the caller may read it.
	http.Handler
	// Index opens the store's index, or says why it is not available.
	Index(ctx context.Context) (Index, error)
	// PublicID is the id clients know a file of the store by; LocalID the
	// store's own id for one, "" when the id is not this machine's.
	PublicID(local string) string
	LocalID(public string) string
}

// Index lists and removes the store's files, by the store's own ids.
type Index interface {
	List(ctx context.Context) ([]protocol.FileInfo, error)
	// Remove returns storage.ErrNotFound for a file it does not hold.
	Remove(ctx context.Context, id string) error
}

// Auth checks the routes' credentials.
type Auth interface {
	route.Auth
	// MayRead reports whether r may read file id: its bearer, or else a
	// token (never the key, which would end up in logs) in ?token=.
	MayRead(r *http.Request, id string) bool
}

// Routes serve the file store.
type Routes struct {
	auth  Auth
	store Store
	log   *slog.Logger
}

// New returns the file routes of a box.
func New(auth Auth, store Store, log *slog.Logger) *Routes {
	return &Routes{auth: auth, store: store, log: log}
}

// Routes mounts /files, DELETE /files/{id} and GET /files/{id}, in that
// order.
func (fr *Routes) Routes() []route.Route {
	isFile := func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/files/") }
	return []route.Route{
		route.Path("/files", fr.serveList),
		{Match: func(r *http.Request) bool { return isFile(r) && r.Method == http.MethodDelete }, Serve: func(w http.ResponseWriter, r *http.Request) {
			fr.serveDelete(w, r, strings.TrimPrefix(r.URL.Path, "/files/"))
		}},
		route.Prefix("/files/", fr.serveFile),
	}
}

func (fr *Routes) serveFile(w http.ResponseWriter, r *http.Request, id string) {
	if !storage.ValidID(id) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !fr.auth.MayRead(r, id) {
		route.Unauthorized(w)
		return
	}
	fr.store.ServeHTTP(w, r)
}

// adminIndex admits the key, an admin token, or a files token not
// limited to some ids, and opens the store's index; it answers 401 or 503
// and reports false when either fails.
func (fr *Routes) adminIndex(w http.ResponseWriter, r *http.Request) (Index, bool) {
	admin := fr.auth.AdmitClaims(w, r, func(c protocol.TokenClaims) bool {
		return c.Allows(protocol.ScopeAdmin) || (c.Allows(protocol.ScopeFiles) && len(c.Files) == 0)
	})
	if !admin {
		return nil, false
	}
	ix, err := fr.store.Index(r.Context())
	if err != nil {
		http.Error(w, "the file store is not available: "+err.Error(), http.StatusServiceUnavailable)
		return nil, false
	}
	return ix, true
}

func (fr *Routes) serveList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	ix, ok := fr.adminIndex(w, r)
	if !ok {
		return
	}
	files, err := ix.List(r.Context())
	if err != nil {
		fr.log.Error("list files", "err", err)
		http.Error(w, "listing the file store failed", http.StatusInternalServerError)
		return
	}
	for i := range files {
		files[i].ID = fr.store.PublicID(files[i].ID)
	}
	body, _ := json.Marshal(protocol.FileList{Files: files})
	route.JSON(w, r, body)
}

func (fr *Routes) serveDelete(w http.ResponseWriter, r *http.Request, id string) {
	if !storage.ValidID(id) {
		http.NotFound(w, r)
		return
	}
	ix, ok := fr.adminIndex(w, r)
	if !ok {
		return
	}
	local := fr.store.LocalID(id)
	if local == "" {
		http.NotFound(w, r)
		return
	}
	switch err := ix.Remove(r.Context(), local); {
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
