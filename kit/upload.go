package kit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// serveUpload answers PUT /uploads/{name}: the body, of the length its
// Content-Length announces (at most limits.max_input), streams into the
// box's file store (a temporary file, synced, then renamed: never held in
// memory, and a failed upload leaves nothing behind, so it is retried from
// the start). The answer is 201 with the stored file's server FileRef,
// which a prompt then names as an input; the file lives for the store's
// TTL. Auth: the key or a token with the "upload" scope.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request, name string) {
	switch r.Method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodHead, http.MethodDelete:
	default:
		route.MethodNotAllowed(w, "PUT, POST, PATCH, HEAD, DELETE")
		return
	}
	if !s.auth.Admit(w, r, protocol.ScopeUpload) {
		return
	}
	if r.Method != http.MethodPut {
		s.serveResumable(w, r, name) // upload_resume.go
		return
	}
	if err := checkInputName(name); err != nil {
		uploadError(w, http.StatusBadRequest, protocol.CodeInput, fmt.Sprintf("upload: %v", err))
		return
	}
	if r.ContentLength < 0 {
		uploadError(w, http.StatusLengthRequired, protocol.CodeInput, "upload: a Content-Length header is required (the size is checked before any byte is stored)")
		return
	}
	if r.ContentLength > s.maxInput {
		uploadError(w, http.StatusRequestEntityTooLarge, protocol.CodeInput,
			fmt.Sprintf("upload %s: %s is larger than limits.max_input (%s)", name, protocol.FormatSize(r.ContentLength), protocol.FormatSize(s.maxInput)))
		return
	}
	mime := r.Header.Get("Content-Type")
	if mime == "application/octet-stream" {
		mime = "" // the store guesses from the name
	}
	ref, err := s.local.Put(r.Context(), storage.Meta{Name: name, Mime: mime, Size: r.ContentLength}, r.Body)
	if err != nil {
		code := http.StatusInternalServerError
		if r.Context().Err() != nil || errors.Is(err, io.ErrUnexpectedEOF) {
			code = http.StatusBadRequest
		}
		s.log.Info("upload failed", "name", name, "size", r.ContentLength, "err", err)
		uploadError(w, code, protocol.CodeError, fmt.Sprintf("upload %s: %v (nothing was kept: send it again)", name, err))
		return
	}
	body, _ := json.Marshal(ref)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

// uploadError answers with the protocol's {code, message} error object.
func uploadError(w http.ResponseWriter, status int, code, msg string) {
	body, _ := json.Marshal(protocol.ErrorBody{Code: code, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
