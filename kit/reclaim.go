package kit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The kit keeps a ledger of its open sessions in the state directory
// (sessions/<id>, written before a session's directories and sandbox are
// made, removed once they are gone), so that a kit killed without a
// chance to clean up (kill -9, an OOM kill, a host crash) is cleaned up
// after by the next one: at boot, reclaim removes what the sessions in
// the ledger left (their work, input and output directories, their
// cgroups and the processes still in them), and any session directory
// under the box's mounts, which no live session can own at boot. Parked
// files are the file store's: its boot sweep keeps indexed files and
// removes temporary ones (kit/storage).

func (c *config) ledgerDir() string { return filepath.Join(c.stateDir, "sessions") }

// noteSession records that session id is about to leave things behind.
func (c *config) noteSession(id string) {
	dir := c.ledgerDir()
	if err := os.MkdirAll(dir, 0o700); err == nil {
		// A persistent session's record may be there already: kept.
		var f *os.File
		f, err = os.OpenFile(filepath.Join(dir, id), os.O_WRONLY|os.O_CREATE, 0o600)
		if err == nil {
			f.Close()
			return
		}
	}
	c.log.Warn("session ledger: cannot record a session; a crash would leave its directories until the next boot's sweep", "session", id)
}

// forgetSession removes session id from the ledger.
func (c *config) forgetSession(id string) {
	if err := os.Remove(filepath.Join(c.ledgerDir(), id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("session ledger", "session", id, "err", err)
	}
}

// reclaimed counts what a boot reclaim removed.
type reclaimed struct {
	sessions, dirs, temps, cgroups, kept int
	bytes                                int64
}

// reclaim removes, at boot, what sessions of an earlier kit process left
// behind, and logs what it removed.
func (c *config) reclaim() reclaimed {
	var r reclaimed
	seen := map[string]bool{}
	entries, _ := os.ReadDir(c.ledgerDir())
	now, dead := time.Now(), c.lastAlive()
	for _, e := range entries {
		id := e.Name()
		if !storage.ValidID(id) {
			continue
		}
		seen[id] = true
		if rec, ok := c.readRecord(id); ok && c.keptAtBoot(rec, now, dead) {
			// A persistent session: its processes go, its directories
			// and record stay for restoreSessions (persist.go).
			if c.sb != nil && c.sb.ReclaimProcesses(id) {
				r.cgroups++
			}
			if c.restore == nil {
				c.restore = map[string]sessionRecord{}
			}
			if dead.After(rec.Active) {
				rec.Active = dead // its wait for its client counts from the kit's death
			}
			c.restore[id] = rec
			r.kept++
			continue
		}
		r.sessions++
		if c.sb != nil && c.sb.Reclaim(id) {
			r.cgroups++
		}
		os.Remove(filepath.Join(c.ledgerDir(), id))
	}
	if !c.sharedDirs {
		for _, k := range []string{protocol.MountWork, protocol.MountInput, protocol.MountOutput} {
			root, ok := c.mounts[k]
			if !ok {
				continue
			}
			dirs, _ := os.ReadDir(root)
			for _, d := range dirs {
				if !d.IsDir() || !c.isSessionID(d.Name()) {
					continue
				}
				if _, kept := c.restore[d.Name()]; kept {
					continue
				}
				if !seen[d.Name()] {
					seen[d.Name()] = true
					r.sessions++
				}
				p := filepath.Join(root, d.Name())
				r.bytes += treeSize(p)
				if err := os.RemoveAll(p); err != nil {
					c.log.Warn("reclaim: removing a dead session's directory", "dir", p, "err", err)
					continue
				}
				r.dirs++
			}
		}
	} else if in, ok := c.mounts[protocol.MountInput]; ok {
		// Shared directories: only the kit's own temporary input files.
		files, _ := os.ReadDir(in)
		for _, f := range files {
			if f.Type().IsRegular() && strings.HasPrefix(f.Name(), protocol.ReservedInputPrefix) {
				p := filepath.Join(in, f.Name())
				size := treeSize(p)
				if os.Remove(p) == nil {
					r.temps++
					r.bytes += size
				}
			}
		}
	}
	if r.sessions > 0 || r.temps > 0 || r.cgroups > 0 {
		c.log.Info("reclaimed what dead sessions left", "sessions", r.sessions, "directories", r.dirs, "temp_files", r.temps, "cgroups", r.cgroups, "bytes", r.bytes)
	}
	if r.kept > 0 {
		c.log.Info("persistent sessions kept for their clients to resume", "sessions", r.kept)
	}
	return r
}

// isSessionID reports whether name has the form of this kit's session
// ids: 32 lowercase hex digits, after "<machine>_" on Fly.
func (c *config) isSessionID(name string) bool {
	if c.machine != "" {
		rest, ok := strings.CutPrefix(name, c.machine+"_")
		if !ok {
			return false
		}
		name = rest
	}
	if len(name) != 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// treeSize adds up the sizes of the regular files under p (p itself when
// it is a file), without following symbolic links.
func treeSize(p string) int64 {
	var n int64
	filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
