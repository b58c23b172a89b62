package fsapi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// A listing reads the directory's descriptor (opened by the helper, as
// the session) with getdents64 into a fixed buffer and answers at most
// limit entries, in the directory's own order; its cursor (?after=) is
// the directory offset (d_off) after the last entry answered, so that a
// directory of a million entries is paged with bounded memory, each page
// taking one seek. Each entry is stat'ed with fstatat on the directory's
// descriptor, one name, no symbolic link followed; where the kit's user
// may not search the directory (a session's own mode 0700 directory
// under privilege separation), through an O_PATH descriptor the helper
// opens instead.

// list answers a page of dir's entries.
func (sv *Server) list(q *req, dir *os.File) {
	query := q.r.URL.Query()
	limit := DefaultListLimit
	if s := query.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fail(q.w, http.StatusBadRequest, fmt.Sprintf("?limit=%.20q: want a count of entries, 1 to %d", s, sv.lim.ListMax))
			return
		}
		limit = n
	}
	limit = min(limit, sv.lim.ListMax)
	fd := int(dir.Fd())
	if s := query.Get("after"); s != "" {
		off, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail(q.w, http.StatusBadRequest, fmt.Sprintf("?after=%.40q: not a cursor this box gave (pass a listing's next)", s))
			return
		}
		if _, err := unix.Seek(fd, off, 0); err != nil {
			fail(q.w, http.StatusBadRequest, fmt.Sprintf("?after=%.40q: not a cursor this box gave (pass a listing's next)", s))
			return
		}
	}
	l := protocol.FSList{Path: q.full(q.rel), Entries: make([]protocol.FSEntry, 0, min(limit, 256))}
	var last int64
	more := false
	err := readDir(fd, func(name []byte, typ uint8, off int64) bool {
		if len(l.Entries) == limit {
			more = true
			return false
		}
		if e, ok := q.dirEntry(fd, string(name), typ); ok {
			l.Entries = append(l.Entries, e)
		}
		last = off
		return true
	})
	if err != nil {
		q.failErr(q.rel, err)
		return
	}
	if more {
		l.Next = strconv.FormatInt(last, 10)
	}
	writeJSON(q.w, q.r, http.StatusOK, l)
}

// readDir calls each with the entries of the directory fd from its
// current offset, "." and ".." left out, until each returns false or the
// directory ends. off is the offset after the entry.
func readDir(fd int, each func(name []byte, typ uint8, off int64) bool) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for b := buf[:n]; len(b) >= 19; {
			ino := binary.NativeEndian.Uint64(b[0:8])
			off := int64(binary.NativeEndian.Uint64(b[8:16]))
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return errors.New("fsapi: a malformed directory entry")
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			if !each(name, typ, off) {
				return nil
			}
		}
	}
}

// dirEntry describes the entry name of the directory fd (q.rel); false
// when it went away meanwhile.
func (q *req) dirEntry(fd int, name string, typ uint8) (protocol.FSEntry, bool) {
	rel := path.Join(q.rel, name)
	var st unix.Stat_t
	err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		// The kit's user may not search the directory: ask the session.
		e, err := q.entryOf(rel)
		if err == nil {
			return e, true
		}
		if errors.Is(err, os.ErrNotExist) {
			return protocol.FSEntry{}, false
		}
		return protocol.FSEntry{Name: name, Path: q.full(rel), Type: direntType(typ)}, true
	}
	if errors.Is(err, syscall.ENOENT) {
		return protocol.FSEntry{}, false
	}
	if err != nil {
		return protocol.FSEntry{Name: name, Path: q.full(rel), Type: direntType(typ)}, true
	}
	e := entry(name, q.full(rel), &st)
	if e.Type == protocol.FSSymlink {
		e.Target, _ = readlinkat(fd, name)
	}
	return e, true
}

// direntType is a getdents d_type as an entry's type.
func direntType(t uint8) string {
	switch t {
	case unix.DT_REG:
		return protocol.FSFile
	case unix.DT_DIR:
		return protocol.FSDir
	case unix.DT_LNK:
		return protocol.FSSymlink
	}
	return protocol.FSOther
}
