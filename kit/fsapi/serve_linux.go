package fsapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// req is one request's decoded target.
type req struct {
	w     http.ResponseWriter
	r     *http.Request
	s     Session
	log   *slog.Logger
	f     Files
	root  int
	rname string // "work"
	rel   string // beneath the root; "" for the root
}

// full is the path as the session knows it: "work/a.txt".
func (q *req) full(rel string) string { return protocol.FSPath(q.rname, rel) }

// Serve answers a request for rest, the path after /sessions/{id}/fs
// ("" or "/{root}/{path}"), on s.
func (sv *Server) Serve(w http.ResponseWriter, r *http.Request, s Session, rest string) {
	if rest == "" || rest == "/" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
		sv.roots(w, r, s)
		return
	}
	rname, rel, err := protocol.ParseFSPath(rest[1:])
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	root := protocol.FSRootIndex(rname)
	if !s.HasRoot(root) {
		fail(w, http.StatusNotFound, fmt.Sprintf("this box has no %s directory (GET .../fs lists the ones it has)", rname))
		return
	}
	q := &req{w: w, r: r, s: s, log: sv.log, root: root, rname: rname, rel: rel}
	q.f, err = s.Files()
	if err != nil {
		if errors.Is(err, ErrEnded) {
			fail(w, http.StatusGone, "the session has ended: its files are gone")
			return
		}
		sv.log.Warn("a session's files cannot be reached", "session", s.ID(), "err", err)
		fail(w, http.StatusServiceUnavailable, "the session's files cannot be reached now (the box's log says why): try again")
		return
	}
	query := r.URL.Query()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case flag(query, "watch"):
			sv.watch(q)
		case flag(query, "stat"):
			q.stat()
		default:
			sv.get(q)
		}
	case http.MethodPut:
		q.put(flag(query, "append"), flag(query, "parents"))
	case http.MethodPost:
		q.op(query.Get("op"))
	case http.MethodDelete:
		q.remove(flag(query, "recursive"))
	default:
		methodNotAllowed(w, "GET, HEAD, PUT, POST, DELETE")
	}
}

// flag reports whether ?name is set to anything but "0" or "false".
func flag(q map[string][]string, name string) bool {
	v, ok := q[name]
	if !ok {
		return false
	}
	return len(v) == 0 || (v[0] != "0" && v[0] != "false")
}

// roots lists the session's directories.
func (sv *Server) roots(w http.ResponseWriter, r *http.Request, s Session) {
	l := protocol.FSList{Path: "", Entries: []protocol.FSEntry{}}
	f, err := s.Files()
	if err != nil {
		if errors.Is(err, ErrEnded) {
			fail(w, http.StatusGone, "the session has ended: its files are gone")
			return
		}
		sv.log.Warn("a session's files cannot be reached", "session", s.ID(), "err", err)
		fail(w, http.StatusServiceUnavailable, "the session's files cannot be reached now (the box's log says why): try again")
		return
	}
	for i, name := range protocol.FSRoots {
		if !s.HasRoot(i) {
			continue
		}
		q := &req{f: f, root: i, rname: name}
		e, err := q.entryOf("")
		if err != nil {
			continue
		}
		l.Entries = append(l.Entries, e)
	}
	writeJSON(w, r, http.StatusOK, l)
}

// get answers a file's bytes or a directory's listing.
func (sv *Server) get(q *req) {
	f, err := q.f.Open(q.root, q.rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		q.failErr(q.rel, err)
		return
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		q.failErr(q.rel, err)
		return
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		sv.list(q, f)
	case unix.S_IFREG:
		q.serveFile(f, &st)
	default:
		fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s is a special file (a device, fifo or socket): it is listed, never read", q.full(q.rel)))
	}
}

// serveFile answers a regular file's bytes, honouring Range and the
// conditional headers; the copy is the server's (sendfile).
func (q *req) serveFile(f *os.File, st *unix.Stat_t) {
	h := q.w.Header()
	mtime := time.Unix(st.Mtim.Unix())
	h.Set("ETag", etag(st.Size, mtime))
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	http.ServeContent(q.w, q.r, "", mtime, f)
}

// etag is a file's validator: its size and modification time.
func etag(size int64, mtime time.Time) string {
	return fmt.Sprintf(`"%x-%x"`, size, mtime.UnixNano())
}

// stat answers one entry; a symbolic link is described, never followed.
func (q *req) stat() {
	e, err := q.entryOf(q.rel)
	if err != nil {
		q.failErr(q.rel, err)
		return
	}
	writeJSON(q.w, q.r, http.StatusOK, e)
}

// entryOf describes rel through an O_PATH descriptor the helper opened.
func (q *req) entryOf(rel string) (protocol.FSEntry, error) {
	f, err := q.f.Open(q.root, rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return protocol.FSEntry{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return protocol.FSEntry{}, err
	}
	name := path.Base(rel)
	if rel == "" {
		name = q.rname
	}
	e := entry(name, q.full(rel), &st)
	if e.Type == protocol.FSSymlink {
		e.Target, _ = readlinkat(int(f.Fd()), "")
	}
	return e, nil
}

// entry describes a file from its stat.
func entry(name, full string, st *unix.Stat_t) protocol.FSEntry {
	e := protocol.FSEntry{
		Name:  name,
		Path:  full,
		Size:  st.Size,
		Mode:  st.Mode & 0o7777,
		MTime: time.Unix(st.Mtim.Unix()).UTC().Format(time.RFC3339Nano),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = protocol.FSFile
	case unix.S_IFDIR:
		e.Type = protocol.FSDir
	case unix.S_IFLNK:
		e.Type = protocol.FSSymlink
	default:
		e.Type = protocol.FSOther
	}
	if e.Type != protocol.FSFile {
		e.Size = 0
		if e.Type == protocol.FSSymlink {
			e.Size = st.Size
		}
	}
	return e
}

// readlinkat reads the link name at dirfd/name ("" for dirfd itself, an
// O_PATH descriptor of the link).
func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// put writes the request's body to the file: into a temporary file beside
// it, renamed over it once the body is whole (so a reader never sees half a
// file, and a failed upload leaves the old one), or appended to it.
func (q *req) put(appendTo, parents bool) {
	if q.rel == "" {
		fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s is the session's directory itself: PUT a file beneath it, %s/name", q.rname, q.rname))
		return
	}
	left, err := q.s.DiskLeft()
	if err != nil {
		q.log.Warn("measuring a session's files for limits.disk", "session", q.s.ID(), "err", err)
		fail(q.w, http.StatusServiceUnavailable, "the session's files could not be measured against limits.disk now (the box's log says why): try again")
		return
	}
	if left >= 0 && q.r.ContentLength > left {
		q.tooLarge(left)
		return
	}
	dir, _ := path.Split(q.rel)
	dir = strings.TrimSuffix(dir, "/")
	if parents && dir != "" {
		if err := q.f.MkdirAll(q.root, dir, 0o777); err != nil {
			q.failErr(dir, err)
			return
		}
	}
	target, tmp := q.rel, ""
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC
	perm := uint32(0o666) // less the session's umask
	if appendTo {
		flags |= unix.O_APPEND
	} else {
		// Keep an existing file's permissions (a script stays
		// executable).
		if old, err := q.f.Open(q.root, q.rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			var st unix.Stat_t
			if unix.Fstat(int(old.Fd()), &st) == nil {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFREG:
					perm = st.Mode & 0o777
				case unix.S_IFDIR:
					old.Close()
					fail(q.w, http.StatusConflict, fmt.Sprintf("%s is a directory: PUT a file beneath it", q.full(q.rel)))
					return
				}
			}
			old.Close()
		}
		tmp = path.Join(dir, ".gbx-put-"+randHex()+".tmp")
		target = tmp
		flags |= unix.O_EXCL
	}
	f, err := q.f.Open(q.root, target, flags, perm)
	if err != nil {
		if tmp != "" && errors.Is(err, os.ErrNotExist) {
			q.failErr(dir, err) // the directory is missing
			return
		}
		q.failErr(q.rel, err)
		return
	}
	done := false
	defer func() {
		f.Close() // every way out, appends too (closed once already on success: harmless)
		if !done && tmp != "" {
			q.f.Remove(q.root, tmp)
		}
	}()
	if appendTo {
		if err := checkRegular(f); err != nil {
			f.Close()
			q.failErr(q.rel, err)
			return
		}
	}
	body := io.Reader(q.r.Body)
	if left >= 0 {
		body = io.LimitReader(body, left+1)
	}
	n, err := io.Copy(f, body)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) {
			q.failErr(q.rel, err)
			return
		}
		fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s: the upload stopped after %d bytes: %v", q.full(q.rel), n, err))
		return
	}
	if left >= 0 && n > left {
		if appendTo {
			// What was appended stays: the session's own writes are
			// limited the same way, by the size they reach.
			f.Close()
		}
		q.tooLarge(left)
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		q.failErr(q.rel, err)
		return
	}
	if err := f.Close(); err != nil {
		q.failErr(q.rel, err)
		return
	}
	if tmp != "" {
		if err := q.f.Rename(q.root, tmp, q.root, q.rel); err != nil {
			q.failErr(q.rel, err)
			return
		}
	}
	done = true
	writeJSON(q.w, q.r, http.StatusCreated, entry(path.Base(q.rel), q.full(q.rel), &st))
}

func checkRegular(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return syscall.EISDIR
	}
	return nil
}

func (q *req) tooLarge(left int64) {
	fail(q.w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s: the session's files may grow by %s more (limits.disk): delete files to make room", q.full(q.rel), protocol.FormatSize(max(left, 0))))
}

func randHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// op answers POST ?op=mkdir|move.
func (q *req) op(op string) {
	body, err := io.ReadAll(io.LimitReader(q.r.Body, protocol.MaxFSOpBody+1))
	if err != nil {
		fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s: reading the body: %v", op, err))
		return
	}
	o, err := protocol.DecodeFSOp(op, body)
	if err != nil {
		fail(q.w, http.StatusBadRequest, err.Error())
		return
	}
	switch op {
	case protocol.FSOpMkdir:
		if q.rel == "" {
			if o.Parents {
				q.stat()
				return
			}
			fail(q.w, http.StatusConflict, fmt.Sprintf("%s exists: it is the session's directory itself", q.rname))
			return
		}
		if o.Parents {
			err = q.f.MkdirAll(q.root, q.rel, 0o777)
		} else {
			err = q.f.Mkdir(q.root, q.rel, 0o777)
		}
		if err != nil {
			q.failErr(q.rel, err)
			return
		}
		e, err := q.entryOf(q.rel)
		if err != nil {
			q.failErr(q.rel, err)
			return
		}
		writeJSON(q.w, q.r, http.StatusCreated, e)
	case protocol.FSOpMove:
		if q.rel == "" {
			fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s is the session's directory itself: it cannot be moved", q.rname))
			return
		}
		troot, trel, _ := protocol.ParseFSPath(o.To) // DecodeFSOp checked it
		ti := protocol.FSRootIndex(troot)
		if !q.s.HasRoot(ti) {
			fail(q.w, http.StatusNotFound, fmt.Sprintf("move to %s: this box has no %s directory", o.To, troot))
			return
		}
		if err := q.f.Rename(q.root, q.rel, ti, trel); err != nil {
			if !errors.Is(err, syscall.EXDEV) {
				q.failErr(q.rel, err)
				return
			}
			// Two mounts (the session's directories are, in its mount
			// namespace): a file is copied, then removed.
			if status, msg := q.copyMove(ti, trel); status != 0 {
				fail(q.w, status, fmt.Sprintf("move %s to %s: %s", q.full(q.rel), o.To, msg))
				return
			}
		}
		to := &req{w: q.w, r: q.r, s: q.s, log: q.log, f: q.f, root: ti, rname: troot}
		e, err := to.entryOf(trel)
		if err != nil {
			to.failErr(trel, err)
			return
		}
		writeJSON(q.w, q.r, http.StatusOK, e)
	}
}

// copyMove moves the regular file q.rel to root/rel across mounts: a
// copy into a temporary file beside the destination (copy_file_range
// where the kernel can), renamed over it, then the source removed. It
// answers 0 or an HTTP status and why.
func (q *req) copyMove(root int, rel string) (int, string) {
	src, err := q.f.Open(q.root, q.rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errStatus(err), "the source: " + errText(err)
	}
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return http.StatusConflict, "a directory cannot be moved to another of the session's directories (another mount): move what it holds file by file"
	}
	if left, err := q.s.DiskLeft(); err != nil {
		return http.StatusInternalServerError, err.Error()
	} else if left >= 0 && st.Size > left {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the copy (another mount) needs %s, and the session's files may grow by %s more (limits.disk)", protocol.FormatSize(st.Size), protocol.FormatSize(left))
	}
	dir, _ := path.Split(rel)
	tmp := path.Join(dir, ".gbx-move-"+randHex()+".tmp")
	dst, err := q.f.Open(root, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, st.Mode&0o777)
	if err != nil {
		return errStatus(err), "the destination: " + errText(err)
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = q.f.Rename(root, tmp, root, rel)
	}
	if err != nil {
		q.f.Remove(root, tmp)
		return errStatus(err), errText(err)
	}
	if err := q.f.Remove(q.root, q.rel); err != nil {
		return errStatus(err), "copied, but the source stays: " + errText(err)
	}
	return 0, ""
}

// errStatus and errText are an error's status and words, as failErr
// answers them, for messages of their own.
func errStatus(err error) int {
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrOutside):
		return http.StatusForbidden
	case errors.Is(err, ErrSpecial):
		return http.StatusBadRequest
	case errors.Is(err, ErrBusy):
		return http.StatusServiceUnavailable
	case errors.As(err, &errno):
		return errnoStatus(errno)
	}
	return http.StatusInternalServerError
}

func errText(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrOutside):
		return "leads outside the session's directory"
	case errors.Is(err, ErrSpecial):
		return "a special file"
	case errors.Is(err, syscall.ELOOP):
		return "a symbolic link, which is never followed"
	case errors.As(err, &errno):
		return errno.Error()
	}
	return "the session's helper failed"
}

// remove answers DELETE.
func (q *req) remove(recursive bool) {
	if q.rel == "" {
		fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s is the session's directory itself: it cannot be removed (remove what is in it)", q.rname))
		return
	}
	var err error
	if recursive {
		err = q.f.RemoveAll(q.root, q.rel)
	} else {
		err = q.f.Remove(q.root, q.rel)
	}
	if err != nil {
		if !recursive && errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			fail(q.w, http.StatusConflict, fmt.Sprintf("%s is a directory that is not empty: DELETE with ?recursive=1 to remove it and all it holds", q.full(q.rel)))
			return
		}
		q.failErr(q.rel, err)
		return
	}
	q.w.WriteHeader(http.StatusNoContent)
}

// failErr answers an error of the helper or the file system about rel,
// naming it as the session knows it and never a host path.
func (q *req) failErr(rel string, err error) {
	full := q.full(rel)
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrEnded):
		fail(q.w, http.StatusGone, "the session has ended: its files are gone")
	case errors.Is(err, ErrBusy):
		fail(q.w, http.StatusServiceUnavailable, fmt.Sprintf("%s: the session's helper ended before it answered (the session's processes were ended): retry", full))
	case errors.Is(err, ErrOutside):
		fail(q.w, http.StatusForbidden, fmt.Sprintf("%s leads outside the session's %s directory (a symbolic link out of it): refused", full, q.rname))
	case errors.Is(err, ErrSpecial):
		fail(q.w, http.StatusBadRequest, fmt.Sprintf("%s is a special file (a device, fifo or socket): it is listed, never opened", full))
	case errors.Is(err, syscall.ELOOP):
		fail(q.w, http.StatusConflict, fmt.Sprintf("%s is a symbolic link, which is never followed: ?stat=1 shows its target", full))
	case errors.Is(err, syscall.ENOTDIR):
		fail(q.w, http.StatusConflict, fmt.Sprintf("%s: a name on the way is not a directory", full))
	case errors.As(err, &errno):
		fail(q.w, errnoStatus(errno), fmt.Sprintf("%s: %s", full, errno.Error()))
	default:
		q.log.Warn("a session's helper failed", "session", q.s.ID(), "path", full, "err", err)
		fail(q.w, http.StatusInternalServerError, fmt.Sprintf("%s: the session's helper failed (the box's log says why)", full))
	}
}

// errnoStatus maps a file system error to an HTTP status.
func errnoStatus(e syscall.Errno) int {
	switch e {
	case syscall.ENOENT:
		return http.StatusNotFound
	case syscall.EACCES, syscall.EPERM, syscall.EROFS:
		return http.StatusForbidden
	case syscall.EEXIST, syscall.ENOTEMPTY, syscall.EISDIR, syscall.ENOTDIR, syscall.EBUSY, syscall.EXDEV, syscall.EINVAL:
		return http.StatusConflict
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return http.StatusRequestEntityTooLarge
	case syscall.ENAMETOOLONG:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// fail answers status with a plain-text message.
func fail(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	for _, k := range []string{"ETag", "Last-Modified", "Content-Length", "Content-Range"} {
		h.Del(k)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	fail(w, http.StatusMethodNotAllowed, "allowed: "+allow)
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "private, no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}
