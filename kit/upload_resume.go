package kit

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Resumable uploads, for files a flaky network may not carry in one go:
//
//	POST  /uploads/{name}   Upload-Length: N      201 {"id": ID, "offset": 0}
//	PATCH /uploads/{ID}     Upload-Offset: K      the next bytes; 204 with the new
//	                                              Upload-Offset, or 201 with the
//	                                              FileRef once all N are in
//	HEAD  /uploads/{ID}                           204, Upload-Offset and Upload-Length
//	DELETE /uploads/{ID}                          drops it
//
// A PATCH whose body is cut keeps what arrived (synced): the client asks
// HEAD for the offset and sends the rest. A PATCH at another offset than
// the upload's gets 409 with the right one. The partial file lives in the
// state directory's uploads/ and is dropped after resumeUploadIdle without
// a PATCH (checked every resumeUploadSweep while any is under way), when
// the box restarts, or on DELETE. Same auth and cap as PUT.
const (
	resumeUploadIdle  = time.Hour
	resumeUploadSweep = 5 * time.Minute
	resumeUploadMax   = 64 // partial uploads at once
	resumeIDPrefix    = "up_"
)

type partialUpload struct {
	mu     sync.Mutex // one PATCH at a time
	id     string
	name   string
	mime   string
	length int64
	offset int64
	path   string
	last   time.Time
	held   atomic.Int64 // offset, for /metrics, which must not wait for a PATCH
}

type resumables struct {
	mu     sync.Mutex
	dir    string
	ups    map[string]*partialUpload
	now    func() time.Time
	every  time.Duration // how often idle uploads are looked for
	sweep  *time.Timer   // armed while an upload is under way
	closed bool
}

func (s *Server) partials() *resumables {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume == nil {
		dir := filepath.Join(s.stateDir, "uploads")
		os.RemoveAll(dir) // an earlier run's partial uploads: their state is gone
		s.resume = &resumables{dir: dir, ups: map[string]*partialUpload{}, now: s.now, every: cmp.Or(s.opts.uploadSweep, resumeUploadSweep)}
	}
	return s.resume
}

// madePartials is the partial uploads if the first has been made, else
// nil (whose methods do nothing): for readers that must not make them.
func (s *Server) madePartials() *resumables {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resume
}

// armLocked makes sure an idle upload is dropped even when no new upload
// comes to sweep it: a timer looks every rs.every while any is under way.
// The caller holds rs.mu.
func (rs *resumables) armLocked() {
	if rs.sweep != nil || rs.closed || len(rs.ups) == 0 {
		return
	}
	rs.sweep = time.AfterFunc(rs.every, func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.sweep = nil
		rs.sweepLocked(rs.now())
		rs.armLocked()
	})
}

// close stops the sweeps (Server.Close).
func (rs *resumables) close() {
	if rs == nil {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	if rs.sweep != nil {
		rs.sweep.Stop()
		rs.sweep = nil
	}
}

// usage is what /metrics reports: partial uploads and the bytes they hold.
func (rs *resumables) usage() (n, bytes int64) {
	if rs == nil {
		return 0, 0
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, u := range rs.ups {
		n++
		bytes += u.held.Load()
	}
	return n, bytes
}

// sweep drops idle partial uploads; the caller holds r.mu.
func (r *resumables) sweepLocked(now time.Time) {
	for id, u := range r.ups {
		if u.mu.TryLock() {
			if now.Sub(u.last) > resumeUploadIdle {
				os.Remove(u.path)
				delete(r.ups, id)
			}
			u.mu.Unlock()
		}
	}
}

// serveResumable answers POST, PATCH, HEAD and DELETE on /uploads/.
func (s *Server) serveResumable(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method == http.MethodPost {
		s.startResumable(w, r, rest)
		return
	}
	if !strings.HasPrefix(rest, resumeIDPrefix) {
		http.NotFound(w, r)
		return
	}
	s.continueResumable(w, r, rest)
}

func (s *Server) startResumable(w http.ResponseWriter, r *http.Request, name string) {
	if err := checkInputName(name); err != nil {
		uploadError(w, http.StatusBadRequest, protocol.CodeInput, fmt.Sprintf("upload: %v", err))
		return
	}
	length, err := strconv.ParseInt(r.Header.Get("Upload-Length"), 10, 64)
	if err != nil || length < 0 {
		uploadError(w, http.StatusBadRequest, protocol.CodeInput, "upload: POST needs an Upload-Length header: the file's size in bytes")
		return
	}
	if length > s.maxInput {
		uploadError(w, http.StatusRequestEntityTooLarge, protocol.CodeInput,
			fmt.Sprintf("upload %s: %s is larger than limits.max_input (%s)", name, protocol.FormatSize(length), protocol.FormatSize(s.maxInput)))
		return
	}
	rs := s.partials()
	rs.mu.Lock()
	rs.sweepLocked(s.now())
	if len(rs.ups) >= resumeUploadMax {
		rs.mu.Unlock()
		w.Header().Set("Retry-After", "60")
		uploadError(w, http.StatusServiceUnavailable, protocol.CodeError, fmt.Sprintf("upload: %d resumable uploads are under way; finish or DELETE one", resumeUploadMax))
		return
	}
	var b [16]byte
	rand.Read(b[:])
	id := resumeIDPrefix + hex.EncodeToString(b[:])
	u := &partialUpload{id: id, name: name, mime: r.Header.Get("Content-Type"), length: length, path: filepath.Join(rs.dir, id), last: s.now()}
	err = os.MkdirAll(rs.dir, 0o700)
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(u.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			rs.ups[id] = u
			rs.armLocked()
		}
	}
	rs.mu.Unlock()
	if err != nil {
		uploadError(w, http.StatusInternalServerError, protocol.CodeError, fmt.Sprintf("upload %s: %v", name, err))
		return
	}
	body, _ := json.Marshal(map[string]any{"id": id, "offset": 0})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", protocol.UploadPath+id)
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

func (s *Server) continueResumable(w http.ResponseWriter, r *http.Request, id string) {
	rs := s.partials()
	rs.mu.Lock()
	u := rs.ups[id]
	rs.mu.Unlock()
	if u == nil {
		uploadError(w, http.StatusNotFound, protocol.CodeInput, fmt.Sprintf("upload %s: unknown or expired: start again with POST", id))
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last = s.now()
	h := w.Header()
	h.Set("Upload-Length", strconv.FormatInt(u.length, 10))
	h.Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodHead:
		h.Set("Upload-Offset", strconv.FormatInt(u.offset, 10))
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodDelete:
		rs.drop(u)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	off, err := strconv.ParseInt(r.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || off != u.offset {
		h.Set("Upload-Offset", strconv.FormatInt(u.offset, 10))
		uploadError(w, http.StatusConflict, protocol.CodeInput, fmt.Sprintf("upload %s: PATCH at offset %q, but the box holds %d bytes: send from there", id, r.Header.Get("Upload-Offset"), u.offset))
		return
	}
	n, err := u.append(r.Body)
	u.offset += n
	u.held.Store(u.offset)
	h.Set("Upload-Offset", strconv.FormatInt(u.offset, 10))
	if err != nil {
		uploadError(w, http.StatusBadRequest, protocol.CodeError, fmt.Sprintf("upload %s: %v (the box holds %d bytes: HEAD and send the rest)", id, err, u.offset))
		return
	}
	if u.offset < u.length {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// All in: into the store, by copy_file_range where the file system
	// can, then the partial file goes.
	f, err := os.Open(u.path)
	if err != nil {
		uploadError(w, http.StatusInternalServerError, protocol.CodeError, fmt.Sprintf("upload %s: %v", id, err))
		return
	}
	mime := u.mime
	if mime == "application/octet-stream" {
		mime = ""
	}
	ref, err := s.local.Put(r.Context(), storage.Meta{Name: u.name, Mime: mime, Size: u.length}, io.LimitReader(f, u.length))
	f.Close()
	if err != nil {
		uploadError(w, http.StatusInternalServerError, protocol.CodeError, fmt.Sprintf("upload %s: store: %v (PATCH nothing and try again)", id, err))
		return
	}
	rs.drop(u)
	body, _ := json.Marshal(ref)
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

// append writes what the body carries, up to the upload's length, and
// syncs it: bytes counted are bytes kept.
func (u *partialUpload) append(body io.Reader) (int64, error) {
	f, err := os.OpenFile(u.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(body, u.length-u.offset))
	if err == nil {
		var extra [1]byte
		if m, _ := body.Read(extra[:]); m > 0 {
			err = fmt.Errorf("the body runs past Upload-Length (%d)", u.length)
		}
	}
	if serr := f.Sync(); serr != nil && err == nil {
		err = serr
	}
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("the body ended early: %w", err)
	}
	return n, err
}

func (rs *resumables) drop(u *partialUpload) {
	rs.mu.Lock()
	delete(rs.ups, u.id)
	rs.mu.Unlock()
	os.Remove(u.path)
}
