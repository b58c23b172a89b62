// Package upload serves /uploads: files a client streams into the box's
// file store before a prompt names them, in one PUT or resumably, in
// pieces a flaky network can carry.
package upload

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Store keeps an uploaded file and answers its server FileRef: the box's
// own file store.
type Store interface {
	Put(ctx context.Context, meta storage.Meta, r io.Reader) (protocol.FileRef, error)
}

// Options are what the uploads need of the box.
type Options struct {
	Auth  route.Auth // the key or a token with the upload scope
	Store Store      // where finished uploads go
	Max   int64      // limits.max_input
	Dir   string     // partial uploads' files; emptied when the first one starts
	Now   func() time.Time
	Log   *slog.Logger
	// Sweep is how often idle partial uploads are looked for while any is
	// under way; zero means every five minutes.
	Sweep time.Duration
}

// Uploads serves PUT, POST, PATCH, HEAD and DELETE under
// protocol.UploadPath, and keeps the resumable uploads under way.
type Uploads struct {
	auth  route.Auth
	store Store
	max   int64
	log   *slog.Logger

	mu      sync.Mutex
	dir     string
	now     func() time.Time
	every   time.Duration
	partial *resumables // made on first use
	closed  bool
}

// New returns the uploads of a box.
func New(o Options) *Uploads {
	return &Uploads{auth: o.Auth, store: o.Store, max: o.Max, log: o.Log, dir: o.Dir, now: o.Now, every: cmp.Or(o.Sweep, resumeUploadSweep)}
}

// Routes mounts protocol.UploadPath.
func (u *Uploads) Routes() []route.Route {
	return []route.Route{route.Prefix(protocol.UploadPath, u.serve)}
}

// partials is the partial uploads, made (and an earlier run's partial
// files removed) on first use.
func (u *Uploads) partials() *resumables {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.partial == nil {
		os.RemoveAll(u.dir) // an earlier run's partial uploads: their state is gone
		u.partial = &resumables{dir: u.dir, ups: map[string]*partialUpload{}, now: u.now, every: u.every, closed: u.closed}
	}
	return u.partial
}

// made is the partial uploads if the first has been made, else nil (whose
// methods do nothing): for readers that must not make them.
func (u *Uploads) made() *resumables {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.partial
}

// Usage is what /metrics reports: partial uploads under way and the bytes
// they hold.
func (u *Uploads) Usage() (n, bytes int64) { return u.made().usage() }

// Close stops the sweeps of idle partial uploads.
func (u *Uploads) Close() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.made().close()
}

// serveUpload answers PUT /uploads/{name}: the body, of the length its
// Content-Length announces (at most limits.max_input), streams into the
// box's file store (a temporary file, synced, then renamed: never held in
// memory, and a failed upload leaves nothing behind, so it is retried from
// the start). The answer is 201 with the stored file's server FileRef,
// which a prompt then names as an input; the file lives for the store's
// TTL. Auth: the key or a token with the "upload" scope.
func (u *Uploads) serve(w http.ResponseWriter, r *http.Request, name string) {
	switch r.Method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodHead, http.MethodDelete:
	default:
		route.MethodNotAllowed(w, "PUT, POST, PATCH, HEAD, DELETE")
		return
	}
	if !u.auth.Admit(w, r, protocol.ScopeUpload) {
		return
	}
	if r.Method != http.MethodPut {
		u.serveResumable(w, r, name) // resume.go
		return
	}
	if err := protocol.CheckInputName(name); err != nil {
		answerError(w, http.StatusBadRequest, protocol.CodeInput, fmt.Sprintf("upload: %v", err))
		return
	}
	if r.ContentLength < 0 {
		answerError(w, http.StatusLengthRequired, protocol.CodeInput, "upload: a Content-Length header is required (the size is checked before any byte is stored)")
		return
	}
	if r.ContentLength > u.max {
		answerError(w, http.StatusRequestEntityTooLarge, protocol.CodeInput,
			fmt.Sprintf("upload %s: %s is larger than limits.max_input (%s)", name, protocol.FormatSize(r.ContentLength), protocol.FormatSize(u.max)))
		return
	}
	mime := r.Header.Get("Content-Type")
	if mime == "application/octet-stream" {
		mime = "" // the store guesses from the name
	}
	ref, err := u.store.Put(r.Context(), storage.Meta{Name: name, Mime: mime, Size: r.ContentLength}, r.Body)
	if err != nil {
		code := http.StatusInternalServerError
		if r.Context().Err() != nil || errors.Is(err, io.ErrUnexpectedEOF) {
			code = http.StatusBadRequest
		}
		u.log.Info("upload failed", "name", name, "size", r.ContentLength, "err", err)
		answerError(w, code, protocol.CodeError, fmt.Sprintf("upload %s: %v (nothing was kept: send it again)", name, err))
		return
	}
	body, _ := json.Marshal(ref)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

// answerError answers with the protocol's {code, message} error object.
func answerError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(protocol.ErrorBody{Code: code, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
