package kit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Inputs in: a prompt's input refs, checked and written into the
// session's input directory before its agent runs.

// checkInputName rejects an input name that is not a plain file name
// (protocol.CheckInputName, which the Go client applies too).
func checkInputName(name string) error { return protocol.CheckInputName(name) }

// checkServerRef applies GET /files/{id}'s rules to a server ref: the
// session's credential may read the file (the key, or a files-scope token
// for it), or the file was parked by a session opened with the same
// credential. Anything else, an unknown id included, is refused with one
// message, so that a ref does not tell whether a file exists.
func (w *workspace) checkServerRef(ctx context.Context, name string, ref protocol.FileRef) error {
	ss := w.ss
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
func (w *workspace) materialise(ctx context.Context, refs map[string]protocol.FileRef) ([]agent.Input, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	srv := w.ss.srv
	dir := w.info.Dirs.Input
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
			if err := w.checkServerRef(ctx, name, ref); err != nil {
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
		n, err := w.writeInput(ctx, adapters[i], ref, filepath.Join(dir, name))
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
// renames it into place, so the agent never sees a partial file, then
// gives it to the session's uid (through the sandbox, which resolves the
// name without following links; in a privilege-separated kit, its
// monitor does).
func (w *workspace) writeInput(ctx context.Context, a storage.Adapter, ref protocol.FileRef, dst string) (int64, error) {
	max := w.ss.srv.maxInput
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
	hr := newHashReader(io.LimitReader(rc, max+1)) // runs.go: the input's digest
	n, err := io.Copy(f, hr)
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
	if err := w.info.Sandbox.Chown(dst); err != nil {
		os.Remove(dst)
		return 0, err
	}
	w.ss.srv.runs.noteFile(w.ss, "inputs", filepath.Base(dst), hr)
	return n, nil
}
