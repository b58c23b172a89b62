package kit

import (
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// openStorage opens the built-in localServer store under the state
// directory (v1's layout: files/ and files.db) and registers it. Its boot
// sweep runs in the background so that it never delays serving.
func (s *Server) openStorage() error {
	files := filepath.Join(s.stateDir, "files")
	db := filepath.Join(s.stateDir, "files.db")
	local, err := storage.OpenLocal(s.ctx, files, db, storage.LocalOptions{
		PublicURL: s.opts.PublicURL,
		Now:       s.opts.Now,
		Logger:    s.log,
	})
	if err != nil {
		return err
	}
	s.local = local
	s.registry.Register(protocol.AdapterLocalServer, local)
	s.files = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local.ServeFile(w, r, r.URL.Path[len("/files/"):])
	})
	started := make(chan struct{})
	go func() {
		defer close(started)
		if err := local.Start(s.ctx); err != nil && s.ctx.Err() == nil {
			s.log.Error("file store", "err", err)
		}
	}()
	s.closers = append(s.closers, func() error {
		<-started
		if err := local.Close(); err != nil {
			return fmt.Errorf("close file store %s: %w", files, err)
		}
		return nil
	})
	return nil
}
