package upload

import (
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
// state directory's uploads/ and is dropped after ResumeIdle without
// a PATCH (checked every resumeUploadSweep while any is under way), when
// the box restarts, or on DELETE. Same auth and cap as PUT.
const (
	ResumeIdle        = time.Hour
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

// close stops the sweeps (Uploads.Close).
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
			if now.Sub(u.last) > ResumeIdle {
				os.Remove(u.path)
				delete(r.ups, id)
			}
			u.mu.Unlock()
		}
	}
}

// serveResumable answers POST, PATCH, HEAD and DELETE on /uploads/.
func (u *Uploads) serveResumable(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method == http.MethodPost {
		u.startResumable(w, r, rest)
		return
	}
	if !strings.HasPrefix(rest, resumeIDPrefix) {
		http.NotFound(w, r)
		return
	}
	u.continueResumable(w, r, rest)
}

func (u *Uploads) startResumable(w http.ResponseWriter, r *http.Request, name string) {
	if err := protocol.CheckInputName(name); err != nil {
		answerError(w, http.StatusBadRequest, protocol.CodeInput, fmt.Sprintf("upload: %v", err))
		return
	}
	length, err := strconv.ParseInt(r.Header.Get("Upload-Length"), 10, 64)
	if err != nil || length < 0 {
		answerError(w, http.StatusBadRequest, protocol.CodeInput, "upload: POST needs an Upload-Length header: the file's size in bytes")
		return
	}
	if length > u.max {
		answerError(w, http.StatusRequestEntityTooLarge, protocol.CodeInput,
			fmt.Sprintf("upload %s: %s is larger than limits.max_input (%s)", name, protocol.FormatSize(length), protocol.FormatSize(u.max)))
		return
	}
	rs := u.partials()
	rs.mu.Lock()
	rs.sweepLocked(rs.now())
	if len(rs.ups) >= resumeUploadMax {
		rs.mu.Unlock()
		w.Header().Set("Retry-After", "60")
		answerError(w, http.StatusServiceUnavailable, protocol.CodeError, fmt.Sprintf("upload: %d resumable uploads are under way; finish or DELETE one", resumeUploadMax))
		return
	}
	var b [16]byte
	rand.Read(b[:])
	id := resumeIDPrefix + hex.EncodeToString(b[:])
	p := &partialUpload{id: id, name: name, mime: r.Header.Get("Content-Type"), length: length, path: filepath.Join(rs.dir, id), last: rs.now()}
	err = os.MkdirAll(rs.dir, 0o700)
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(p.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			rs.ups[id] = p
			rs.armLocked()
		}
	}
	rs.mu.Unlock()
	if err != nil {
		answerError(w, http.StatusInternalServerError, protocol.CodeError, fmt.Sprintf("upload %s: %v", name, err))
		return
	}
	body, _ := json.Marshal(map[string]any{"id": id, "offset": 0})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", protocol.UploadPath+id)
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

func (u *Uploads) continueResumable(w http.ResponseWriter, r *http.Request, id string) {
	rs := u.partials()
	rs.mu.Lock()
	p := rs.ups[id]
	rs.mu.Unlock()
	if p == nil {
		answerError(w, http.StatusNotFound, protocol.CodeInput, fmt.Sprintf("upload %s: unknown or expired: start again with POST", id))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = rs.now()
	h := w.Header()
	h.Set("Upload-Length", strconv.FormatInt(p.length, 10))
	h.Set("Cache-Control", "no-store")
	switch r.Method {
	case http.MethodHead:
		h.Set("Upload-Offset", strconv.FormatInt(p.offset, 10))
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodDelete:
		rs.drop(p)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	off, err := strconv.ParseInt(r.Header.Get("Upload-Offset"), 10, 64)
	if err != nil || off != p.offset {
		h.Set("Upload-Offset", strconv.FormatInt(p.offset, 10))
		answerError(w, http.StatusConflict, protocol.CodeInput, fmt.Sprintf("upload %s: PATCH at offset %q, but the box holds %d bytes: send from there", id, r.Header.Get("Upload-Offset"), p.offset))
		return
	}
	n, err := p.append(r.Body)
	p.offset += n
	p.held.Store(p.offset)
	h.Set("Upload-Offset", strconv.FormatInt(p.offset, 10))
	if err != nil {
		answerError(w, http.StatusBadRequest, protocol.CodeError, fmt.Sprintf("upload %s: %v (the box holds %d bytes: HEAD and send the rest)", id, err, p.offset))
		return
	}
	if p.offset < p.length {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// All in: into the store, by copy_file_range where the file system
	// can, then the partial file goes.
	f, err := os.Open(p.path)
	if err != nil {
		answerError(w, http.StatusInternalServerError, protocol.CodeError, fmt.Sprintf("upload %s: %v", id, err))
		return
	}
	mime := p.mime
	if mime == "application/octet-stream" {
		mime = ""
	}
	ref, err := u.store.Put(r.Context(), storage.Meta{Name: p.name, Mime: mime, Size: p.length}, io.LimitReader(f, p.length))
	f.Close()
	if err != nil {
		answerError(w, http.StatusInternalServerError, protocol.CodeError, fmt.Sprintf("upload %s: store: %v (PATCH nothing and try again)", id, err))
		return
	}
	rs.drop(p)
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
