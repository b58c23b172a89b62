package kit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// workspace is a session's directories (work, input, output) and its
// sandbox, made the first time a prompt runs, or ahead of any for a warm
// session: a prompt's inputs are written into it (inputs.go) and its
// outputs collected from it (outputs.go). Only the runner goroutine uses
// it (and end, once the runner is gone), so it has no lock.
type workspace struct {
	ss      *session
	info    *agent.Session // the agent's view of the session; nil until made
	made    bool           // on the ledger (reclaim.go), directories maybe made
	dirs    agent.Dirs     // the directories made, removed with the session
	outSnap *snapshot      // the output directory when outputs were last collected
}

// prepare creates the session's directories and sandbox, the first time.
// A failed attempt leaves what it made for remove, and the next prompt
// tries again.
func (w *workspace) prepare() error {
	if w.info != nil {
		return nil
	}
	ss := w.ss
	srv := ss.srv
	srv.noteSession(ss.id) // reclaim.go
	w.made = true
	var dirs agent.Dirs
	for _, d := range []struct {
		key string
		dst *string
	}{{protocol.MountWork, &dirs.Work}, {protocol.MountInput, &dirs.Input}, {protocol.MountOutput, &dirs.Output}} {
		root, ok := srv.mounts[d.key]
		if !ok {
			continue
		}
		p, err := sessionDir(root, srv.realMounts[d.key], ss.id, srv.sharedDirs)
		if err != nil {
			return codeErr(protocol.CodeError, fmt.Errorf("create session directory: %w", err))
		}
		*d.dst = p
		// Recorded as soon as made, so that remove finds it whatever
		// fails next.
		w.dirs = dirs
	}
	box, err := srv.sb.Open(ss.id, dirSet(dirs).list())
	if err != nil {
		return codeErr(protocol.CodeError, fmt.Errorf("set up the session's sandbox: %w", err))
	}
	proxyEnv, err := ss.egressEnv(box)
	if err != nil {
		box.Close()
		return err
	}
	ss.obs.box.Store(box) // the inspector samples its cgroup
	w.info = &agent.Session{
		ID:       ss.id,
		Dirs:     dirs,
		Env:      mergeEnv(srv.sessionEnv(ss.id, dirSet(dirs)), proxyEnv),
		Preamble: preamble(srv.man, dirs, srv.egress != nil),
		Manifest: srv.man,
		Log:      ss.logger(),
		Sandbox:  box,
	}
	return nil
}

// sessionDir makes a session's directory under a mount's root and returns
// its path with symbolic links resolved. real is the root resolved at
// boot ("" if it could not be): a directory the kit has just made under
// it is its own real path, so the common case costs one mkdir, not a
// walk of every component. Anything else (the root changed since boot,
// the directory was there) is made and resolved in full.
func sessionDir(root, real, id string, shared bool) (string, error) {
	if real != "" {
		if shared {
			return real, nil
		}
		p := filepath.Join(real, id)
		if err := os.Mkdir(p, 0o755); err == nil {
			return p, nil
		}
	}
	p := root
	if !shared {
		p = filepath.Join(root, id)
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return p, nil
}

// clear empties the session's work directory.
func (w *workspace) clear() {
	dir := w.info.Dirs.Work
	if dir == "" {
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.ss.logger().Warn("clear-workspace", "err", err)
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			w.ss.logger().Warn("clear-workspace", "err", err)
		}
	}
}

// remove closes the sandbox, killing whatever the agent left running,
// removes the session's directories and takes the session off the
// ledger. The session has ended.
func (w *workspace) remove() {
	ss := w.ss
	// Killing and removing block in system calls: on a thread that goes
	// with them (sandbox.OwnThread).
	sandbox.OwnThread(func() {
		if w.info != nil && w.info.Sandbox != nil {
			// Whatever the agent left running dies with the session.
			w.info.Sandbox.Close()
		}
		if w.made && !ss.srv.sharedDirs {
			for _, d := range []string{w.dirs.Work, w.dirs.Input, w.dirs.Output} {
				if d == "" {
					continue
				}
				if err := os.RemoveAll(d); err != nil {
					ss.logger().Warn("removing a session directory", "dir", d, "err", err)
				}
			}
		}
	})
	if w.made {
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
