package kit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"

	"github.com/glovebox-dev/glovebox/kit/fsapi"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A session's files: /sessions/{id}/fs (kit/fsapi), done as the session
// through its helper (kit/sandbox's Helper: the session's uid,
// namespaces, Landlock domain and seccomp filter), which hands back
// descriptors that the kit reads and writes. Linux only; the capability
// "fs" says a box has it.

// fsFeature is the files feature of /sessions/{id}/.
func fsFeature(log *slog.Logger) sessionFeature {
	srv := fsapi.New(fsapi.Limits{}, log)
	return sessionFeature{
		name:  "fs",
		scope: protocol.ScopeWorkspace,
		serve: func(w http.ResponseWriter, r *http.Request, ss *session, rest string) {
			srv.Serve(w, r, fsSession{ss}, rest)
		},
	}
}

// fsCaps are the capabilities the files feature adds.
func fsCaps() []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	return []string{protocol.CapWorkspaceFiles}
}

// fsSession is a session as kit/fsapi sees it.
type fsSession struct{ ss *session }

var _ fsapi.Session = fsSession{}

func (f fsSession) ID() string               { return f.ss.id }
func (f fsSession) Context() context.Context { return f.ss.ctx }

func (f fsSession) HasRoot(root int) bool {
	info, err := f.ss.sandboxed()
	if err != nil {
		// Files answers why.
		return true
	}
	dirs := []string{info.Dirs.Work, info.Dirs.Input, info.Dirs.Output}
	return root >= 0 && root < len(dirs) && dirs[root] != ""
}

func (f fsSession) Files() (fsapi.Files, error) {
	info, err := f.ss.sandboxed()
	if errors.Is(err, errSessionEnded) {
		return nil, fsapi.ErrEnded
	}
	if err != nil {
		return nil, err
	}
	return sessionFiles(info.Sandbox)
}

func (f fsSession) DiskLeft() (int64, error) {
	limit := f.ss.srv.diskLimit
	if limit <= 0 {
		return -1, nil
	}
	info, err := f.ss.sandboxed()
	if err != nil {
		return 0, err
	}
	used, err := info.Sandbox.DiskUsed()
	if err != nil {
		return 0, err
	}
	return max(limit-used, 0), nil
}
