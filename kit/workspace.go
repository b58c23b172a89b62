package kit

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// workspace is a session's directories (work, input, output) and its
// sandbox, made the first time a prompt runs, ahead of any for a warm
// session, or when a session's own feature (a terminal, its files) needs
// them first (session.sandboxed): a prompt's inputs are written into it
// (inputs.go) and its outputs collected from it (outputs.go). The runner
// goroutine uses it (and end, once the runner is gone); mu only orders
// its making and removal with sandboxed's callers, and info, once set,
// does not change until the session ends.
type workspace struct {
	ss      *session
	mu      sync.Mutex
	info    *agent.Session // the agent's view of the session; nil until made
	made    bool           // on the ledger (reclaim.go), directories maybe made
	removed bool           // the session ended: nothing is made again
	outSnap *snapshot      // the output directory when outputs were last collected
}

// errSessionEnded is why a session's feature finds no sandbox.
var errSessionEnded = errors.New("the session has ended")

// sandboxed returns the session's directories and sandbox, making them
// if no prompt has yet: for a session's own features, from any
// goroutine. It fails once the session has ended.
func (ss *session) sandboxed() (*agent.Session, error) {
	if ss.ctx.Err() != nil {
		return nil, errSessionEnded
	}
	if err := ss.workspace.prepare(); err != nil {
		return nil, err
	}
	if err := ss.wake(); err != nil {
		return nil, err
	}
	return ss.workspace.info, nil
}

// prepare creates the session's directories and sandbox, the first time.
// A failed attempt leaves only the session on the ledger, and the next
// prompt tries again.
func (w *workspace) prepare() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.removed {
		return errSessionEnded
	}
	if w.info != nil {
		return nil
	}
	ss := w.ss
	srv := ss.srv
	srv.noteSession(ss.id) // reclaim.go
	w.made = true
	// The sandbox makes the directories (sessionMounts, in its
	// SessionRoots) and removes them when the session closes.
	box, err := srv.sb.OpenSession(ss.id)
	if err != nil {
		return codeErr(protocol.CodeError, fmt.Errorf("set up the session's directories and sandbox: %w", err))
	}
	var dirs agent.Dirs
	for i, dst := range []*string{&dirs.Work, &dirs.Input, &dirs.Output} {
		if d := box.Dirs(); i < len(d) {
			*dst = d[i]
		}
	}
	proxyEnv, err := ss.egressEnv(box)
	if err != nil {
		box.Close()
		return err
	}
	portEnv, err := srv.preview.sessionPort(ss, box) // preview_port.go
	if err != nil {
		box.Close()
		return codeErr(protocol.CodeError, fmt.Errorf("give the session its preview port: %w", err))
	}

	ss.obs.box.Store(box) // the inspector samples its cgroup
	w.info = &agent.Session{
		ID:       ss.id,
		Dirs:     dirs,
		Env:      mergeEnv(mergeEnv(srv.sessionEnv(ss.id, dirSet(dirs)), proxyEnv), portEnv),
		Preamble: preamble(srv.man, dirs, srv.egress != nil),
		Manifest: srv.man,
		Log:      ss.logger(),
		Sandbox:  box,
		Resume:   ss.resumeAgent(),
	}
	return nil
}

// clear empties the session's work directory.
func (w *workspace) clear() {
	if err := w.info.Sandbox.Clear(); err != nil {
		w.ss.logger().Warn("clear-workspace", "err", err)
	}
}

// remove closes the sandbox, killing whatever the agent left running and
// removing the session's directories, and takes the session off the
// ledger. The session has ended.
func (w *workspace) remove(keep bool) {
	ss := w.ss
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removed = true
	// Killing and removing block in system calls: on a thread that goes
	// with them (sandbox.OwnThread).
	sandbox.OwnThread(func() {
		if w.info != nil && w.info.Sandbox != nil {
			close := w.info.Sandbox.Close
			if keep {
				close = w.info.Sandbox.Release // persist.go: the directories stay
			}
			if err := close(); err != nil {
				ss.logger().Warn("closing the session's sandbox", "err", err)
			}
		}
	})
	if w.made && !keep {
		ss.srv.forgetSession(ss.id)
	}
}

// resolveTag makes a tagged path absolute (relative to the work directory)
// and checks that it lies inside one of the session's directories.
func (w *workspace) resolveTag(p string) (string, error) {
	if p == "" {
		return "", errors.New("output path is empty")
	}
	d := w.info.Dirs
	if !filepath.IsAbs(p) {
		if d.Work == "" {
			return "", fmt.Errorf("output path %q is relative and the box has no work directory", p)
		}
		p = filepath.Join(d.Work, p)
	}
	p = filepath.Clean(p)
	if w.inDirs(p) {
		return p, nil
	}
	return "", fmt.Errorf("output path %s is outside the session's directories (%s)", p, joinDirs(d))
}

// inDirs reports whether p lies inside one of the session's directories.
func (w *workspace) inDirs(p string) bool {
	d := w.info.Dirs
	for _, dir := range []string{d.Work, d.Input, d.Output} {
		if dir != "" && within(dir, p) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or lies below it (both clean, absolute).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

func joinDirs(d agent.Dirs) string {
	var ds []string
	for _, p := range []string{d.Work, d.Input, d.Output} {
		if p != "" {
			ds = append(ds, p)
		}
	}
	sort.Strings(ds)
	return strings.Join(ds, ", ")
}
