package storage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// ValidID reports whether id may name a stored file: v1's route pattern
// ^[A-Za-z0-9_-]+$ (ids this store creates are UUIDs).
func ValidID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// SafeFilename is v1's Content-Disposition filename: name with every byte
// outside [A-Za-z0-9._-] replaced by "_", or "file" when name is empty.
// ("a b\"c.bin" becomes "a_b_c.bin".) Each byte of a multi-byte UTF-8
// character becomes one "_", as v1 replaces UTF-16 units; only the length
// of such runs differs.
func SafeFilename(name string) string {
	if name == "" {
		return "file"
	}
	b := []byte(name)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// FilesCSP is the Content-Security-Policy of a file served as a download:
// nothing loads, nothing runs, and the document is a sandboxed unique
// origin, so an agent-written .html or .svg opened from the box's origin
// reaches neither that origin nor the token in its link.
const FilesCSP = "default-src 'none'; sandbox"

// ServeFile answers GET /files/{id} for a request the kit has already
// authenticated; the kit passes the {id} path segment.
//
// GET and HEAD are served, other methods get 405. An id outside
// ^[A-Za-z0-9_-]+$ or with no row is 404; a file whose ttl_at < now (in
// seconds) is 410. 200 carries Content-Type, Content-Length,
// Content-Disposition: attachment; filename="<SafeFilename>",
// Content-Security-Policy: FilesCSP, Cache-Control: private, no-store and
// X-Content-Type-Options: nosniff; with LocalOptions.Inline, v1's
// "inline" disposition and no CSP. The body is
// streamed from the file (sendfile where the platform has it).
//
// With ?consume=1 (exactly "1"), the file and its row are deleted only
// after the whole body was written without error: a client that goes away
// mid-body leaves the file in place. Consumers of one id are served one at
// a time, so of several concurrent consumers exactly one receives the file
// and the others get 404 (unless the first one's send failed).
//
// A row whose file has gone is answered with 404 and removed.
func (l *Local) ServeFile(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if !ValidID(id) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	ctx := r.Context()
	consume := r.Method == http.MethodGet && r.URL.Query().Get("consume") == "1"
	if consume {
		unlock, err := l.lockConsume(ctx, id)
		if err != nil { // the client went away, or the server is stopping
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		defer unlock()
	}

	row, err := l.lookup(ctx, id)
	if errors.Is(err, ErrNotFound) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if err != nil {
		l.log.Error("serve file", "id", id, "err", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if l.expired(row) {
		w.WriteHeader(http.StatusGone)
		return
	}
	f, err := l.openFile(ctx, id, row)
	if errors.Is(err, ErrNotFound) {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if err != nil {
		l.log.Error("serve file", "id", id, "err", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	defer f.Close()

	h := w.Header()
	h.Set("Content-Type", row.Mime)
	h.Set("Content-Length", strconv.FormatInt(row.Size, 10))
	if l.inline {
		h.Set("Content-Disposition", `inline; filename="`+SafeFilename(row.Name)+`"`)
	} else {
		h.Set("Content-Disposition", `attachment; filename="`+SafeFilename(row.Name)+`"`)
		h.Set("Content-Security-Policy", FilesCSP)
	}
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// A LimitedReader over the file lets net/http hand the copy to
	// sendfile, and stops at the indexed size even if the file grew.
	n, err := io.Copy(w, io.LimitReader(f, row.Size))
	if err != nil || n != row.Size {
		l.log.Debug("file send incomplete", "id", id, "sent", n, "size", row.Size, "err", err)
		return
	}
	if consume {
		// The request may be over by now; deletion must not depend on it.
		if err := l.remove(context.WithoutCancel(ctx), id); err != nil {
			l.log.Error("consume file", "id", id, "err", err)
		}
	}
}

// consumeLock serialises ?consume=1 requests for one id.
type consumeLock struct {
	ch   chan struct{} // holds one token while a consumer runs
	refs int
}

// lockConsume waits until no other consumer of id runs, or ctx is done.
func (l *Local) lockConsume(ctx context.Context, id string) (unlock func(), err error) {
	l.mu.Lock()
	c := l.consuming[id]
	if c == nil {
		c = &consumeLock{ch: make(chan struct{}, 1)}
		l.consuming[id] = c
	}
	c.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		c.refs--
		if c.refs == 0 {
			delete(l.consuming, id)
		}
		l.mu.Unlock()
	}
	select {
	case c.ch <- struct{}{}:
		return func() { <-c.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
