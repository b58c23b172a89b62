package kit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// What terminals (terminal.go) and processes (processes.go) share: a
// table of each session's entries, ended with the session, and how a
// request's command, environment and directory become a sandbox.Spec.

// Defaults for the entries a session may hold at once.
const (
	DefaultMaxTerminals = 16
	DefaultMaxProcesses = 32
)

// execTable is one feature's entries (terminals or processes), per
// session. A session's entries end when it does. mu guards sets; each
// set's own lock orders its entries' starts, so that one session's slow
// start holds up no other session's.
type execTable[T any] struct {
	prefix string // of the entries' ids: "t" (t1, t2...) or "p"
	max    int
	end    func(T) // ends an entry: kills its command, frees its files
	done   func(T) bool

	mu   sync.Mutex
	sets map[*session]*execSet[T]
}

type execSet[T any] struct {
	mu    sync.Mutex
	ended bool // the session ended: nothing more is added
	next  int
	order []string
	items map[string]T
}

// errTooMany: a session holds as many terminals or processes as it may.
var errTooMany = errors.New("kit: too many")

// set is ss's set, made (with its end with the session) when create is set.
func (t *execTable[T]) set(ss *session, create bool) *execSet[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.sets[ss]
	if set == nil && create && ss.ctx.Err() == nil {
		if t.sets == nil {
			t.sets = map[*session]*execSet[T]{}
		}
		set = &execSet[T]{items: map[string]T{}}
		t.sets[ss] = set
		context.AfterFunc(ss.ctx, func() { t.endAll(ss) })
	}
	return set
}

// add makes an entry with mk, under the next id of ss's set. At max
// entries it drops the oldest ended one, else refuses with errTooMany.
func (t *execTable[T]) add(ss *session, mk func(id string) (T, error)) (T, error) {
	var zero T
	set := t.set(ss, true)
	if set == nil {
		return zero, errSessionEnded
	}
	var evicted []T
	defer func() {
		// An ended entry dropped for a new one still holds what end frees
		// (a terminal's PTY and the goroutine that reads it).
		for _, v := range evicted {
			t.end(v)
		}
	}()
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.ended {
		return zero, errSessionEnded
	}
	if len(set.order) >= t.max {
		i := slices.IndexFunc(set.order, func(id string) bool { return t.done(set.items[id]) })
		if i < 0 {
			return zero, fmt.Errorf("%w: the session has %d running already, its limit: end one (DELETE) first", errTooMany, len(set.order))
		}
		evicted = append(evicted, set.items[set.order[i]])
		delete(set.items, set.order[i])
		set.order = slices.Delete(set.order, i, i+1)
	}
	set.next++
	id := t.prefix + strconv.Itoa(set.next)
	v, err := mk(id)
	if err != nil {
		return zero, err
	}
	set.items[id] = v
	set.order = append(set.order, id)
	return v, nil
}

// get finds an entry of ss.
func (t *execTable[T]) get(ss *session, id string) (T, bool) {
	var zero T
	set := t.set(ss, false)
	if set == nil {
		return zero, false
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	v, ok := set.items[id]
	return v, ok
}

// list is ss's entries, oldest first.
func (t *execTable[T]) list(ss *session) []T {
	set := t.set(ss, false)
	if set == nil {
		return nil
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	out := make([]T, 0, len(set.order))
	for _, id := range set.order {
		out = append(out, set.items[id])
	}
	return out
}

// remove takes an entry of ss out of the table and ends it.
func (t *execTable[T]) remove(ss *session, id string) bool {
	set := t.set(ss, false)
	if set == nil {
		return false
	}
	set.mu.Lock()
	v, ok := set.items[id]
	if ok {
		delete(set.items, id)
		set.order = slices.DeleteFunc(set.order, func(x string) bool { return x == id })
	}
	set.mu.Unlock()
	if ok {
		t.end(v)
	}
	return ok
}

// endAll ends every entry of a session that has ended, once a start under
// way has added its own.
func (t *execTable[T]) endAll(ss *session) {
	t.mu.Lock()
	set := t.sets[ss]
	delete(t.sets, ss)
	t.mu.Unlock()
	if set == nil {
		return
	}
	set.mu.Lock()
	set.ended = true
	items := make([]T, 0, len(set.order))
	for _, id := range set.order {
		items = append(items, set.items[id])
	}
	set.mu.Unlock()
	for _, v := range items {
		t.end(v)
	}
}

// execPath splits the rest of a terminal's or process's path (after
// /sessions/{id}/terminals): "" or "/" is the collection; "/{id}" an
// entry; "/{id}/{sub}" an entry's sub-route. Anything else (more
// segments, an empty or dot segment) is not a route: ok is false.
func execPath(rest string) (id, sub string, ok bool) {
	if rest == "" || rest == "/" {
		return "", "", true
	}
	p, found := strings.CutPrefix(rest, "/")
	if !found {
		return "", "", false
	}
	id, sub, _ = strings.Cut(p, "/")
	for _, seg := range []string{id, sub} {
		if strings.ContainsAny(seg, "/\\\x00") || seg == "." || seg == ".." {
			return "", "", false
		}
	}
	if id == "" || (strings.Count(p, "/") == 1 && sub == "") {
		return "", "", false
	}
	return id, sub, true
}

// execSpec is the sandbox.Spec of a request's command in a session: the
// session's environment with the request's on top, its directory
// resolved against the session's.
func execSpec(info *agent.Session, command []string, env map[string]string, dir string) (sandbox.Spec, error) {
	if len(command) == 0 {
		return sandbox.Spec{}, errors.New("no command")
	}
	var extra []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		extra = append(extra, k+"="+env[k])
	}
	wd, err := execDir(info.Dirs, dir)
	if err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{
		Path: command[0],
		Args: command,
		Dir:  wd,
		Env:  mergeEnv(slices.Clone(info.Env), extra),
	}, nil
}

// execDir is the working directory a request names: the work directory
// by default, a relative path below it, or an absolute path inside the
// session's directories. (The command runs as the session, in its
// sandbox: a link that leads elsewhere leads only where the session may
// go.)
func execDir(d agent.Dirs, dir string) (string, error) {
	base := d.Work
	if base == "" {
		base = "/"
	}
	if dir == "" {
		return base, nil
	}
	p := dir
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	for _, root := range []string{d.Work, d.Input, d.Output} {
		if root != "" && within(root, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("dir %s is outside the session's directories (%s)", dir, joinDirs(d))
}

// defaultShell is the command of a terminal that names none: the
// session's $SHELL, else bash where the image has it, else sh.
func defaultShell(env []string) []string {
	for _, kv := range slices.Backward(env) {
		if v, ok := cutEnv(kv, "SHELL"); ok && v != "" {
			return []string{v}
		}
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return []string{"/bin/bash"}
	}
	return []string{"/bin/sh"}
}

func cutEnv(kv, name string) (string, bool) {
	if len(kv) > len(name) && kv[:len(name)] == name && kv[len(name)] == '=' {
		return kv[len(name)+1:], true
	}
	return "", false
}

// exitInfo is a command's end as the wire says it.
func exitInfo(st sandbox.ExitStatus, err error) *protocol.ExitInfo {
	e := &protocol.ExitInfo{Code: st.Code, Limit: st.Limit}
	if st.Signal != 0 {
		e.Signal = sandbox.SignalName(st.Signal)
	}
	if err != nil && st.Code == 0 && st.Signal == 0 {
		e.Code = -1
	}
	return e
}

// ended is a process's end, or nil while it runs.
func ended(p *sandbox.Process) *protocol.ExitInfo {
	select {
	case <-p.Done():
		return exitInfo(p.Wait())
	default:
		return nil
	}
}

// signalOf is the signal a request names.
func signalOf(name string) (syscall.Signal, error) {
	n, ok := protocol.SignalNumber(name)
	if !ok {
		return 0, fmt.Errorf("signal %q is not one of %v", name, protocol.Signals)
	}
	return syscall.Signal(n), nil
}

// readBody reads a request's body, at most limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read the request: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the request is over %d bytes", limit)
	}
	return b, nil
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// execError answers an error of a terminal or process request.
func execError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, errTooMany):
		status = http.StatusTooManyRequests
	case errors.Is(err, errSessionEnded):
		status = http.StatusGone
	}
	http.Error(w, err.Error(), status)
}

// methodNotAllowed answers a method a route does not take.
func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "method not allowed here; use "+allow, http.StatusMethodNotAllowed)
}
