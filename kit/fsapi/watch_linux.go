package fsapi

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// A watch is an inotify instance of the kit's own, to which the session's
// helper adds a watch per directory of the tree (as the session: the
// session's permissions and Landlock domain decide what it may watch).
// Its events are read here and written as NDJSON FSEvents. New
// directories are watched as they appear, and what they already hold is
// reported as created. A watch covers at most Limits.WatchDirs
// directories; past that, and when the kernel's queue overflows (a client
// that reads too slowly), a "lost" event says so. It ends when the client
// goes, the session ends or the watched directory is removed.

// watchMask is what every directory of a watch reports. No
// IN_DONT_FOLLOW: the helper resolves the path itself (never following
// a final link) and watches the directory it opened through
// /proc/self/fd, a link that must be followed.
const watchMask = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// maxBatch bounds the events one read of the kernel's queue turns into
// (a new directory's contents reported as created count too).
const maxBatch = 10000

// watcher is one watch's state.
type watcher struct {
	q     *req
	ino   *os.File
	inoFD int // ino's descriptor, read without ino.Fd (which would make it blocking)
	max   int
	dirs  map[int]string // watched directories (rel), by watch descriptor
	full  bool           // max reached: a lost event was sent
	gone  bool           // the watched directory itself went away
	out   []protocol.FSEvent
	moved map[uint32]movedFrom // IN_MOVED_FROM waiting for its IN_MOVED_TO
}

type movedFrom struct {
	rel string
	dir bool
}

func (sv *Server) acquire(id string) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.total >= sv.lim.Watches || sv.watching[id] >= sv.lim.SessionWatches {
		return false
	}
	sv.total++
	sv.watching[id]++
	return true
}

func (sv *Server) release(id string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.total--
	if sv.watching[id]--; sv.watching[id] <= 0 {
		delete(sv.watching, id)
	}
}

// watch answers GET ?watch=1: the events beneath q.rel, until the client
// goes or the session ends.
func (sv *Server) watch(q *req) {
	id := q.s.ID()
	if !sv.acquire(id) {
		fail(q.w, http.StatusTooManyRequests, fmt.Sprintf("too many watches under way (at most %d per session, %d on the box): end one first", sv.lim.SessionWatches, sv.lim.Watches))
		return
	}
	defer sv.release(id)
	e, err := q.entryOf(q.rel)
	if err != nil {
		q.failErr(q.rel, err)
		return
	}
	if e.Type != protocol.FSDir {
		fail(q.w, http.StatusConflict, fmt.Sprintf("%s is not a directory: watch the directory that holds it", q.full(q.rel)))
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		fail(q.w, http.StatusServiceUnavailable, fmt.Sprintf("the box cannot watch files now (inotify: %v): try later", err))
		return
	}
	ino := os.NewFile(uintptr(fd), "inotify")
	defer ino.Close()
	w := &watcher{q: q, ino: ino, inoFD: fd, max: sv.lim.WatchDirs, dirs: map[int]string{}, moved: map[uint32]movedFrom{}}
	if err := w.add(q.rel, false); err != nil {
		q.failErr(q.rel, err)
		return
	}
	// The client or the session going ends the read below.
	stopClient := context.AfterFunc(q.r.Context(), func() { ino.Close() })
	defer stopClient()
	stopSession := context.AfterFunc(q.s.Context(), func() { ino.Close() })
	defer stopSession()

	h := q.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	q.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(q.w)
	enc := json.NewEncoder(q.w)
	send := func() bool {
		for _, ev := range w.out {
			if enc.Encode(ev) != nil {
				return false
			}
		}
		w.out = w.out[:0]
		return rc.Flush() == nil
	}
	if !send() {
		return
	}
	buf := make([]byte, 64<<10)
	for !w.gone {
		n, err := ino.Read(buf)
		if err != nil {
			return
		}
		w.parse(buf[:n])
		if !send() {
			return
		}
	}
}

// emit queues an event for rel.
func (w *watcher) emit(typ, rel string, dir bool) {
	if len(w.out) >= maxBatch {
		if len(w.out) == maxBatch {
			w.out = append(w.out, protocol.FSEvent{Type: protocol.FSEventLost, Path: w.q.full(w.q.rel),
				Message: fmt.Sprintf("more than %d events at once: list again to catch up", maxBatch)})
		}
		return
	}
	w.out = append(w.out, protocol.FSEvent{Type: typ, Path: w.q.full(rel), Dir: dir})
}

// add watches the directory rel and those beneath it; with created, what
// they hold is reported as created (a directory that appeared). Only an
// error about rel itself is returned.
func (w *watcher) add(rel string, created bool) error {
	queue := []string{rel}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if len(w.dirs) >= w.max {
			if !w.full {
				w.full = true
				w.out = append(w.out, protocol.FSEvent{Type: protocol.FSEventLost, Path: w.q.full(w.q.rel),
					Message: fmt.Sprintf("the watch covers %d directories, its limit: events in %s and other directories beyond it are not reported", w.max, w.q.full(d))})
			}
			continue
		}
		wd, err := w.q.f.Watch(w.ino, w.q.root, d, watchMask)
		// Whatever the helper did with the descriptor, the reads
		// below must not block: closing ino ends them.
		unix.SetNonblock(w.inoFD, true)
		if err != nil {
			if d == rel {
				return err
			}
			continue // gone meanwhile, or not the session's to watch
		}
		w.dirs[wd] = d
		f, err := w.q.f.Open(w.q.root, d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		fd := int(f.Fd())
		readDir(fd, func(name []byte, typ uint8, _ int64) bool {
			sub := path.Join(d, string(name))
			isDir := typ == unix.DT_DIR
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				isDir = unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			}
			if created {
				w.emit(protocol.FSEventCreate, sub, isDir)
			}
			if isDir && len(w.dirs)+len(queue) < w.max+1 {
				queue = append(queue, sub)
			}
			return true
		})
		f.Close()
	}
	return nil
}

// parse turns a read of inotify events into FSEvents.
func (w *watcher) parse(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int(int32(binary.NativeEndian.Uint32(b[0:4])))
		mask := binary.NativeEndian.Uint32(b[4:8])
		cookie := binary.NativeEndian.Uint32(b[8:12])
		n := int(binary.NativeEndian.Uint32(b[12:16]))
		if unix.SizeofInotifyEvent+n > len(b) {
			break
		}
		name := string(b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+n])
		name = strings.TrimRight(name, "\x00")
		b = b[unix.SizeofInotifyEvent+n:]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			w.out = append(w.out, protocol.FSEvent{Type: protocol.FSEventLost, Path: w.q.full(w.q.rel),
				Message: "the kernel's event queue overflowed (events came faster than they were read): list again to catch up"})
			continue
		}
		dir, ok := w.dirs[wd]
		if !ok {
			continue
		}
		rel := path.Join(dir, name)
		isDir := mask&unix.IN_ISDIR != 0
		switch {
		case mask&unix.IN_IGNORED != 0:
			delete(w.dirs, wd)
			if dir == w.q.rel {
				w.gone = true
			}
		case mask&unix.IN_CREATE != 0:
			w.emit(protocol.FSEventCreate, rel, isDir)
			if isDir {
				w.add(rel, true)
			}
		case mask&unix.IN_CLOSE_WRITE != 0:
			w.emit(protocol.FSEventWrite, rel, false)
		case mask&unix.IN_DELETE != 0:
			w.emit(protocol.FSEventRemove, rel, isDir)
		case mask&unix.IN_MOVED_FROM != 0:
			w.moved[cookie] = movedFrom{rel, isDir}
		case mask&unix.IN_MOVED_TO != 0:
			if from, ok := w.moved[cookie]; ok {
				delete(w.moved, cookie)
				if len(w.out) < maxBatch {
					w.out = append(w.out, protocol.FSEvent{Type: protocol.FSEventRename, Path: w.q.full(rel), From: w.q.full(from.rel), Dir: isDir})
				}
				if isDir {
					w.renamed(from.rel, rel)
				}
				break
			}
			w.emit(protocol.FSEventCreate, rel, isDir) // moved in from outside
			if isDir {
				w.add(rel, true)
			}
		case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			if dir == w.q.rel {
				w.emit(protocol.FSEventRemove, dir, true)
				w.gone = true
			}
		}
	}
	// Moved out of the watched tree: removed, as far as it knows.
	for cookie, from := range w.moved {
		delete(w.moved, cookie)
		w.emit(protocol.FSEventRemove, from.rel, from.dir)
		if from.dir {
			w.forget(from.rel)
		}
	}
}

// renamed rewrites the paths of watched directories from beneath from to
// beneath to.
func (w *watcher) renamed(from, to string) {
	for wd, d := range w.dirs {
		if d == from || strings.HasPrefix(d, from+"/") {
			w.dirs[wd] = to + d[len(from):]
		}
	}
}

// forget stops watching rel and what lies beneath it.
func (w *watcher) forget(rel string) {
	for wd, d := range w.dirs {
		if d == rel || strings.HasPrefix(d, rel+"/") {
			_, err := unix.InotifyRmWatch(w.inoFD, uint32(wd))
			if err != nil && !errors.Is(err, syscall.EINVAL) {
				continue
			}
			delete(w.dirs, wd)
		}
	}
}
