package kit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Outputs out: what a prompt wrote under the output directory or tagged,
// stored through the outputs policy as the refs of its complete frame.

// fileState is what tells a changed file from an unchanged one.
type fileState struct {
	size  int64
	mtime int64
	ino   uint64
}

// snapshot records the regular files under a directory (by slash path)
// and enough about the directory itself to tell, with one stat, that an
// empty tree is still empty.
type snapshot struct {
	files   map[string]fileState
	dirs    int   // subdirectories seen
	mtime   int64 // the directory's mtime (ns) before it was read
	takenAt int64 // when (ns)
}

// mtimeMargin is how long before a snapshot the directory must have last
// changed for its mtime to prove that nothing was added since: file system
// timestamps come from a coarse clock (a few milliseconds), so a change
// right after an earlier one may not move the mtime.
const mtimeMargin = int64(100 * time.Millisecond)

func takeSnapshot(dir string) *snapshot {
	snap := &snapshot{files: map[string]fileState{}, takenAt: time.Now().UnixNano()}
	if info, err := os.Lstat(dir); err == nil {
		snap.mtime = info.ModTime().UnixNano()
	}
	walkFiles(dir, "", snap)
	return snap
}

// unchanged reports whether dir provably holds what snap recorded without
// reading it: the tree was empty and the directory has not changed since
// well before the snapshot.
func (snap *snapshot) unchanged(dir string) bool {
	if len(snap.files) > 0 || snap.dirs > 0 || snap.takenAt-snap.mtime < mtimeMargin {
		return false
	}
	info, err := os.Lstat(dir)
	return err == nil && info.ModTime().UnixNano() == snap.mtime
}

// walkFiles adds the regular files under dir to snap, keyed by prefix plus
// their relative slash path. It costs one open and one read per directory
// and one lstat per file; symbolic links are not followed.
func walkFiles(dir, prefix string, snap *snapshot) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := prefix + e.Name()
		switch t := e.Type(); {
		case t.IsDir():
			snap.dirs++
			walkFiles(filepath.Join(dir, e.Name()), name+"/", snap)
		case t.IsRegular():
			if info, err := e.Info(); err == nil {
				snap.files[name] = stateOf(info)
			}
		}
	}
}

func stateOf(info fs.FileInfo) fileState {
	st := fileState{size: info.Size(), mtime: info.ModTime().UnixNano()}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// baseline returns the output directory as it was when outputs were last
// collected, taking it now the first time: what changed since then is
// the next prompt's, so files a failed prompt left come with the next
// one.
func (w *workspace) baseline() *snapshot {
	if w.outSnap == nil && w.info.Dirs.Output != "" {
		w.outSnap = takeSnapshot(w.info.Dirs.Output)
	}
	return w.outSnap
}

// output is one file to return.
type output struct {
	name string // the key in the outputs map
	path string
}

// collect stores the files the prompt created or changed under the output
// directory and the tagged files through the outputs policy.
func (w *workspace) collect(ctx context.Context, promptID string, before *snapshot, tags []string, policy protocol.Policy) (map[string]protocol.FileRef, error) {
	var outs []output
	taken := map[string]bool{}
	seen := map[string]bool{}
	outDir := w.info.Dirs.Output
	if outDir != "" && !before.unchanged(outDir) {
		after := takeSnapshot(outDir)
		w.outSnap = after
		for _, rel := range sortedKeys(after.files) {
			if old, ok := before.files[rel]; ok && old == after.files[rel] {
				continue
			}
			p := filepath.Join(outDir, filepath.FromSlash(rel))
			outs = append(outs, output{name: rel, path: p})
			taken[rel] = true
			seen[p] = true
		}
	}
	for _, tag := range tags {
		real, err := filepath.EvalSymlinks(tag)
		if err != nil {
			return nil, codeErr(protocol.CodeOutput, fmt.Errorf("/output %s: %w", tag, pathCause(err)))
		}
		if !w.inDirs(real) {
			return nil, codeErr(protocol.CodeOutput, fmt.Errorf("/output %s: resolves to %s, outside the session's directories", tag, real))
		}
		info, err := os.Stat(real)
		if err != nil {
			return nil, codeErr(protocol.CodeOutput, fmt.Errorf("/output %s: %w", tag, pathCause(err)))
		}
		if !info.Mode().IsRegular() {
			return nil, codeErr(protocol.CodeOutput, fmt.Errorf("/output %s: not a regular file", tag))
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		name := filepath.Base(real)
		if outDir != "" && within(outDir, real) {
			rel, _ := filepath.Rel(outDir, real)
			name = filepath.ToSlash(rel)
		}
		name = unique(name, taken)
		taken[name] = true
		outs = append(outs, output{name: name, path: real})
	}
	refs := make(map[string]protocol.FileRef, len(outs))
	inlineLeft := w.ss.srv.budget.inlineBudget()
	for _, o := range outs {
		ref, err := w.store(ctx, promptID, o, policy, &inlineLeft)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, codeErr(protocol.CodeOutput, fmt.Errorf("output %q: %w", o.name, err))
		}
		refs[o.name] = ref
	}
	return refs, nil
}

// store streams one output file to the adapter the policy picks. An
// inline rule counts only while the file fits in what is left of the
// complete frame's inline budget (*inlineLeft, base64 bytes), which it
// then takes; otherwise the next rule applies.
func (w *workspace) store(ctx context.Context, promptID string, o output, policy protocol.Policy, inlineLeft *int64) (protocol.FileRef, error) {
	ss := w.ss
	f, err := w.openOutput(o.path)
	if err != nil {
		return protocol.FileRef{}, pathCause(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return protocol.FileRef{}, err
	}
	if !info.Mode().IsRegular() {
		return protocol.FileRef{}, errors.New("not a regular file")
	}
	meta := storage.Meta{
		Name:      o.name,
		Mime:      protocol.GuessMime(o.name),
		Size:      info.Size(),
		PromptID:  promptID,
		SessionID: ss.id,
		Owner:     ss.owner,
	}
	reg := ss.srv.registry
	cost := inlineCost(meta)
	registered := func(key string) bool {
		if isInline(reg, key) && cost > *inlineLeft {
			return false
		}
		return reg.Registered(key)
	}
	rule, err := storage.Pick(policy, meta.Size, registered)
	if errors.Is(err, storage.ErrNoAdapter) && cost > *inlineLeft {
		if _, ierr := storage.Pick(policy, meta.Size, reg.Registered); ierr == nil {
			return protocol.FileRef{}, fmt.Errorf("%d bytes do not fit inline: the prompt's outputs may carry %d bytes inline in their complete frame (half of limits.max_message) and no later outputs rule applies; add one (such as localServer) or write smaller outputs", meta.Size, ss.srv.budget.inlineBudget())
		}
	}
	if err != nil {
		return protocol.FileRef{}, err
	}
	a, ok := reg.Adapter(rule.Use.Adapter)
	if !ok {
		return protocol.FileRef{}, fmt.Errorf("storage adapter %s: %w", rule.Use.Adapter, storage.ErrUnregistered)
	}
	meta.Options = rule.Use.Options
	hr := newHashReader(io.LimitReader(f, info.Size())) // runs.go: the output's digest
	ref, err := a.Put(ctx, meta, hr)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("store with %s: %w", rule.Use.Adapter, err)
	}
	ss.srv.runs.noteFile(ss, "outputs", o.name, hr)
	if ref.Kind == protocol.KindInline {
		*inlineLeft -= cost
	}
	return ref, nil
}

// inlineCost is what a file takes of a complete frame when inline: its
// base64 data, plus room for its name and the ref's other fields.
func inlineCost(meta storage.Meta) int64 {
	return (meta.Size+2)/3*4 + int64(len(meta.Name))*6 + 256
}

// isInline reports whether the adapter under key stores files inline.
func isInline(reg *storage.Registry, key string) bool {
	if key == protocol.AdapterInline {
		return true
	}
	a, _ := reg.Adapter(key)
	_, ok := a.(*storage.Inline)
	return ok
}

// openOutput opens a file in one of the session's directories for
// reading, through an os.Root of that directory: the kit reads as root
// what the agent wrote, so no symbolic link, last or intermediate, may
// lead it out of the session's directories, whatever the agent changes
// meanwhile.
func (w *workspace) openOutput(p string) (*os.File, error) {
	for _, dir := range dirSet(w.info.Dirs).list() {
		if !within(dir, p) {
			continue
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil, err
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		return root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	}
	return nil, fmt.Errorf("%s is outside the session's directories", p)
}

// unique returns name, or name with a counter before its extension when
// name is taken.
func unique(name string, taken map[string]bool) string {
	if !taken[name] {
		return name
	}
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 2; ; i++ {
		n := stem + "-" + strconv.Itoa(i) + ext
		if !taken[n] {
			return n
		}
	}
}
