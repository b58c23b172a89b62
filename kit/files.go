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
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// checkInputName rejects an input name that is not a plain file name
// (protocol.CheckInputName, which the Go client applies too).
func checkInputName(name string) error { return protocol.CheckInputName(name) }

// checkServerRef applies GET /files/{id}'s rules to a server ref: the
// session's credential may read the file (the key, or a files-scope token
// for it), or the file was parked by a session opened with the same
// credential. Anything else, an unknown id included, is refused with one
// message, so that a ref does not tell whether a file exists.
func (ss *session) checkServerRef(ctx context.Context, name string, ref protocol.FileRef) error {
	if ss.mayReadFile != nil && ss.mayReadFile(ref.ID) {
		return nil
	}
	owner, err := ss.srv.local.Owner(ctx, ref.ID)
	if err == nil && owner != "" && owner == ss.owner {
		return nil
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		ss.logger().Warn("server ref: owner lookup", "id", ref.ID, "err", err)
	}
	return codeErr(protocol.CodeInput, fmt.Errorf("input %q: server file %q is unknown, or this session's credential may not read it: a server ref reads files parked by sessions of the same credential, or any file with the box key or a files-scope token for it", name, ref.ID))
}

// inputAccepted reports whether the inputs policy names the adapter key.
func (s *Server) inputAccepted(key string) bool {
	for _, r := range s.man.StoragePolicy.Inputs.Rules {
		if r.Use.Adapter == key {
			return true
		}
	}
	return false
}

// materialise writes a prompt's inputs into the session's input directory.
// Every name and kind is checked before anything is fetched.
func (ss *session) materialise(ctx context.Context, refs map[string]protocol.FileRef) ([]agent.Input, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	srv := ss.srv
	dir := ss.info.Dirs.Input
	if dir == "" {
		return nil, codeErr(protocol.CodeInput, errors.New("this box has no input directory (manifest fs.input), so it takes no inputs"))
	}
	names := sortedKeys(refs)
	adapters := make([]storage.Adapter, len(names))
	for i, name := range names {
		ref := refs[name]
		if err := checkInputName(name); err != nil {
			return nil, codeErr(protocol.CodeInput, err)
		}
		if err := ref.Validate(); err != nil {
			return nil, codeErr(protocol.CodeInput, fmt.Errorf("input %q: %w", name, err))
		}
		if ref.Kind == protocol.KindServer {
			if err := ss.checkServerRef(ctx, name, ref); err != nil {
				return nil, err
			}
			adapters[i] = srv.local
			continue
		}
		a, err := srv.registry.ForRef(ref)
		if err != nil {
			return nil, codeErr(protocol.CodeInput, err)
		}
		if key := storage.KeyForKind(ref.Kind); !srv.inputAccepted(key) {
			return nil, codeErr(protocol.CodeInput, fmt.Errorf("input %q: %s inputs are not accepted by this box (its storage_policy.inputs does not name the %q adapter)", name, ref.Kind, key))
		}
		adapters[i] = a
	}
	out := make([]agent.Input, 0, len(names))
	for i, name := range names {
		ref := refs[name]
		n, err := ss.writeInput(ctx, adapters[i], ref, filepath.Join(dir, name))
		if err != nil {
			return nil, codeErr(protocol.CodeInput, fmt.Errorf("input %q: %w", name, err))
		}
		mime := ref.Mime
		if mime == "" {
			mime = protocol.GuessMime(name)
		}
		out = append(out, agent.Input{Name: name, Path: filepath.Join(dir, name), Mime: mime, Size: n})
	}
	return out, nil
}

// writeInput streams one input into a temporary file beside dst and
// renames it into place, so the agent never sees a partial file.
func (ss *session) writeInput(ctx context.Context, a storage.Adapter, ref protocol.FileRef, dst string) (int64, error) {
	max := ss.srv.maxInput
	rc, err := a.Open(ctx, ref, max)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	f, err := os.CreateTemp(filepath.Dir(dst), ".input-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	if uid := ss.info.Sandbox.UID(); uid >= 0 {
		// The session's uid owns its inputs (by the descriptor: no path
		// the agent could have swapped is followed).
		if err := f.Chown(uid, uid); err != nil {
			f.Close()
			os.Remove(tmp)
			return 0, err
		}
	}
	n, err := io.Copy(f, io.LimitReader(rc, max+1))
	if err == nil && n > max {
		err = fmt.Errorf("larger than limits.max_input (%s)", protocol.FormatSize(max))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return n, nil
}

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

// output is one file to return.
type output struct {
	name string // the key in the outputs map
	path string
}

// collect stores the files the prompt created or changed under the output
// directory and the tagged files through the outputs policy.
func (ss *session) collect(ctx context.Context, promptID string, before *snapshot, tags []string, policy protocol.Policy) (map[string]protocol.FileRef, error) {
	var outs []output
	taken := map[string]bool{}
	seen := map[string]bool{}
	outDir := ss.info.Dirs.Output
	if outDir != "" && !before.unchanged(outDir) {
		after := takeSnapshot(outDir)
		ss.outSnap = after
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
		if !ss.inDirs(real) {
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
	inlineLeft := ss.srv.inlineBudget()
	for _, o := range outs {
		ref, err := ss.store(ctx, promptID, o, policy, &inlineLeft)
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
func (ss *session) store(ctx context.Context, promptID string, o output, policy protocol.Policy, inlineLeft *int64) (protocol.FileRef, error) {
	f, err := ss.openOutput(o.path)
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
			return protocol.FileRef{}, fmt.Errorf("%d bytes do not fit inline: the prompt's outputs may carry %d bytes inline in their complete frame (half of limits.max_message) and no later outputs rule applies; add one (such as localServer) or write smaller outputs", meta.Size, ss.srv.inlineBudget())
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
	ref, err := a.Put(ctx, meta, io.LimitReader(f, info.Size()))
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("store with %s: %w", rule.Use.Adapter, err)
	}
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
func (ss *session) openOutput(p string) (*os.File, error) {
	for _, dir := range dirSet(ss.info.Dirs).list() {
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

// inDirs reports whether p lies inside one of the session's directories.
func (ss *session) inDirs(p string) bool {
	d := ss.info.Dirs
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
