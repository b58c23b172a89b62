// Package fsapi serves a session's files over HTTP: listed, stat'ed, read
// (with ranges), written (streamed), made, moved, removed and watched,
// beneath the session's directories and as the session (its uid, its
// namespaces, its Landlock domain).
//
// Every path a client names is decoded by protocol.ParseFSPath into a
// root (work, input, output) and a slash path beneath it, then resolved by
// the session's helper (kit/sandbox's Helper, behind Files), which
// refuses "..", symbolic links that leave the root and special files, and
// hands back descriptors: the bytes then move between the client and the
// descriptor in this process, by io.Copy (sendfile for reads), never
// through the helper. Errors name paths as the session knows them
// ("work/a.txt"), never the host's.
//
// Routes, under /sessions/{id}/fs (kit/session_routes.go checks the
// credential and finds the session):
//
//	GET  /fs                          the session's roots, as an FSList
//	GET  /fs/{root}/{path}            a file's bytes (Range, ETag), or a directory's entries (FSList, ?limit=&after=)
//	GET  /fs/{root}/{path}?stat=1     one FSEntry; a symbolic link is described, never followed
//	GET  /fs/{root}/{dir}?watch=1     NDJSON FSEvents beneath the directory, recursive, until the client goes
//	PUT  /fs/{root}/{path}            the body becomes the file (a temporary file beside it, renamed over it); ?append=1 appends; ?parents=1 makes missing directories
//	POST /fs/{root}/{path}?op=mkdir   FSOp body {"parents": true}
//	POST /fs/{root}/{path}?op=move    FSOp body {"to": "output/b.txt"}
//	DELETE /fs/{root}/{path}          a file, a symbolic link or an empty directory; ?recursive=1 a whole tree
package fsapi

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
)

// Files is what the feature asks of a session's helper
// (sandbox.Helper): operations on paths beneath one of the session's
// directories (by index into protocol.FSRoots), done as the session.
// Errors wrap the errno where there is one, ErrOutside for a path that
// would leave its root, ErrSpecial for a device, fifo or socket.
type Files interface {
	Open(root int, rel string, flags int, perm uint32) (*os.File, error)
	Mkdir(root int, rel string, perm uint32) error
	MkdirAll(root int, rel string, perm uint32) error
	Rename(root int, from string, toRoot int, to string) error
	Remove(root int, rel string) error
	RemoveAll(root int, rel string) error
	Watch(ino *os.File, root int, rel string, mask uint32) (int, error)
}

// Errors a Files implementation wraps.
var (
	ErrOutside = errors.New("fsapi: the path leads outside the session's directory")
	ErrSpecial = errors.New("fsapi: a special file")
	// ErrEnded: the session has ended.
	ErrEnded = errors.New("fsapi: the session has ended")
	// ErrBusy: the session's helper went away before it answered (its
	// processes were ended); the next request may succeed.
	ErrBusy = errors.New("fsapi: the session's helper ended before it answered")
)

// Session is the session a request reaches.
type Session interface {
	// ID is the session's id.
	ID() string
	// Context ends with the session.
	Context() context.Context
	// HasRoot reports whether the box has the directory root (an index
	// into protocol.FSRoots).
	HasRoot(root int) bool
	// Files is the session's helper, started on first use; it fails with
	// ErrEnded once the session has ended.
	Files() (Files, error)
	// DiskLeft is how many bytes the session's files may still grow by
	// (limits.disk less what they hold), or -1 where there is no limit.
	DiskLeft() (int64, error)
}

// Limits of the feature; zero fields take the defaults.
type Limits struct {
	// ListMax is the most entries a listing page holds (?limit= is
	// capped by it). Default 10,000.
	ListMax int
	// WatchDirs is the most directories one watch covers. Default 4,096.
	WatchDirs int
	// Watches is the most watches at once, per session and in all.
	// Default 8 and 64 (each is an inotify instance of the kit's user,
	// whose kernel limit, max_user_instances, is often 128).
	SessionWatches, Watches int
}

// Defaults.
const (
	DefaultListLimit      = 1000
	DefaultListMax        = 10000
	DefaultWatchDirs      = 4096
	DefaultSessionWatches = 8
	DefaultWatches        = 64
)

// Server serves the files of the sessions it is handed.
type Server struct {
	lim Limits
	log *slog.Logger // why a session's files could not be reached

	mu       sync.Mutex
	watching map[string]int // watches under way, by session id
	total    int
}

// New returns a Server with lim (zero fields: the defaults) that logs to
// log what it does not tell clients (host paths, the helper's errors).
func New(lim Limits, log *slog.Logger) *Server {
	if lim.ListMax <= 0 {
		lim.ListMax = DefaultListMax
	}
	if lim.WatchDirs <= 0 {
		lim.WatchDirs = DefaultWatchDirs
	}
	if lim.SessionWatches <= 0 {
		lim.SessionWatches = DefaultSessionWatches
	}
	if lim.Watches <= 0 {
		lim.Watches = DefaultWatches
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{lim: lim, log: log, watching: map[string]int{}}
}
