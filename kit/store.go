package kit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/glovebox-dev/glovebox/kit/files"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// localStore is the built-in localServer store. It opens in the background
// so that opening SQLite (milliseconds on a fresh database) and the boot
// sweep never delay serving; on a box with no database yet (nothing to
// sweep) it opens on first use, which keeps SQLite out of an idle kit's
// memory. Its users wait until it is open.
type localStore struct {
	startOnce sync.Once
	start     func()
	ready     chan struct{}
	l         *storage.Local
	err       error
	// machine, on Fly, prefixes the ids of the files this machine parks
	// (see fly.go); the store itself knows them without it.
	machine string
}

var (
	_ storage.Adapter = (*localStore)(nil)
	_ files.Store     = (*localStore)(nil)
)

// stores are the box's storage: the adapters by registry key, the
// built-in store (which also serves GET /files/{id}), and what closes
// them, in the order they opened.
type stores struct {
	registry *storage.Registry
	local    *localStore
	closers  []func() error
}

// openLocal registers the built-in store under the state directory
// (v1's layout: files/ and files.db) as localServer; it opens under ctx.
// With usable false (the state directory is unusable, which boot
// reports) the store stays registered, so that the outputs policy is
// still checked, but every use fails.
func (st *stores) openLocal(ctx context.Context, stateDir, machine string, usable bool, o storage.LocalOptions) {
	dir := filepath.Join(stateDir, "files")
	db := filepath.Join(stateDir, "files.db")
	ls := &localStore{ready: make(chan struct{}), machine: machine}
	ls.start = func() { go ls.open(ctx, dir, db, o) }
	if !usable {
		ls.start = func() {
			ls.err = fmt.Errorf("file store: state dir %s is not usable", stateDir)
			close(ls.ready)
		}
	} else if _, err := os.Stat(db); err == nil {
		ls.startOnce.Do(ls.start) // files from an earlier run: sweep them now
	}
	st.local = ls
	st.registry.Register(protocol.AdapterLocalServer, ls)
	st.closers = append(st.closers, func() error {
		ls.startOnce.Do(func() { close(ls.ready) }) // never opened: now never will
		<-ls.ready
		if ls.l == nil {
			return nil
		}
		if err := ls.l.Close(); err != nil {
			return fmt.Errorf("close file store %s: %w", dir, err)
		}
		return nil
	})
}

// close closes what opened, last first.
func (st *stores) close() error {
	var errs []error
	for i := len(st.closers) - 1; i >= 0; i-- {
		if err := st.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	st.closers = nil
	return errors.Join(errs...)
}

func (ls *localStore) open(ctx context.Context, dir, db string, o storage.LocalOptions) {
	defer close(ls.ready)
	ls.l, ls.err = storage.OpenLocal(ctx, dir, db, o)
	if ls.err != nil {
		ls.err = fmt.Errorf("file store: %w", ls.err)
		o.Logger.Error("file store", "err", ls.err)
		return
	}
	if err := ls.l.Start(ctx); err != nil && ctx.Err() == nil {
		o.Logger.Error("file store", "err", err)
	}
}

func (ls *localStore) get(ctx context.Context) (*storage.Local, error) {
	ls.startOnce.Do(ls.start)
	select {
	case <-ls.ready:
		return ls.l, ls.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Put implements storage.Adapter.
func (ls *localStore) Put(ctx context.Context, meta storage.Meta, r io.Reader) (protocol.FileRef, error) {
	l, err := ls.get(ctx)
	if err != nil {
		return protocol.FileRef{}, err
	}
	ref, err := l.Put(ctx, meta, r)
	if err == nil && ls.machine != "" {
		local := ref.ID
		ref.ID = ls.machine + "_" + local
		ref.URL = strings.TrimSuffix(ref.URL, local) + ref.ID
	}
	return ref, err
}

// PublicID is the id clients know a file of this machine's store by.
func (ls *localStore) PublicID(local string) string {
	if ls.machine == "" {
		return local
	}
	return ls.machine + "_" + local
}

// Index opens the store for the file routes (kit/files).
func (ls *localStore) Index(ctx context.Context) (files.Index, error) {
	l, err := ls.get(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// LocalID returns the store's own id for a file id of this machine.
func (ls *localStore) LocalID(id string) string {
	if ls.machine == "" {
		return id
	}
	if local, ok := strings.CutPrefix(id, ls.machine+"_"); ok {
		return local
	}
	return "" // another machine's, or none: not here
}

// Open implements storage.Adapter.
func (ls *localStore) Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error) {
	l, err := ls.get(ctx)
	if err != nil {
		return nil, err
	}
	ref.ID = ls.LocalID(ref.ID)
	return l.Open(ctx, ref, max)
}

// Owner returns the owner recorded for a file of this machine.
func (ls *localStore) Owner(ctx context.Context, id string) (string, error) {
	l, err := ls.get(ctx)
	if err != nil {
		return "", err
	}
	local := ls.LocalID(id)
	if local == "" {
		return "", storage.ErrNotFound
	}
	return l.Owner(ctx, local)
}

// ServeHTTP serves GET /files/{id}.
func (ls *localStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l, err := ls.get(r.Context())
	if err != nil {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	id := ls.LocalID(r.URL.Path[len("/files/"):])
	if id == "" {
		http.NotFound(w, r)
		return
	}
	l.ServeFile(w, r, id)
}

// usage reads the store's totals for /metrics; a store not yet opened (no
// database on disk until the first parked file) holds none.
func (ls *localStore) usage(ctx context.Context, log *slog.Logger) (files, bytes int64) {
	select {
	case <-ls.ready:
	default:
		return 0, 0
	}
	if ls.l == nil {
		return 0, 0
	}
	files, bytes, err := ls.l.Usage(ctx)
	if err != nil {
		log.Debug("metrics: file store usage", "err", err)
	}
	return files, bytes
}
