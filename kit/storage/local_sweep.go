package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sweep removes, once, every file whose ttl_at < now (seconds) with its
// row, every file named like an id that has no row (an orphan: a crash
// between writing and indexing, a row deleted by hand), and temp files
// older than an hour that no Put of this process is writing. It returns
// how many files it removed. Other names in the directory are left alone.
func (l *Local) Sweep(ctx context.Context, now time.Time) (int, error) {
	n, _, err := l.sweep(ctx, now, false)
	return n, err
}

// sweep is Sweep; at boot (boot true) it removes every temporary file,
// whatever its age: one directory serves one process at a time, so none is
// being written. It also returns the bytes removed.
func (l *Local) sweep(ctx context.Context, now time.Time, boot bool) (int, int64, error) {
	expired, err := queryStrings(ctx, l.db, `DELETE FROM files WHERE ttl_at < ? RETURNING id`, now.Unix())
	if err != nil {
		return 0, 0, fmt.Errorf("sweep %s: %w", l.dir, err)
	}
	removed, bytes := 0, int64(0)
	for _, id := range expired {
		p := filepath.Join(l.dir, id)
		size := fileSize(p)
		err := os.Remove(p)
		if err == nil {
			removed++
			bytes += size
		} else if !errors.Is(err, fs.ErrNotExist) {
			l.log.Error("sweep expired file", "id", id, "err", err)
		}
	}

	n, b, err := l.sweepOrphans(ctx, now, boot)
	return removed + n, bytes + b, err
}

func fileSize(p string) int64 {
	if info, err := os.Lstat(p); err == nil {
		return info.Size()
	}
	return 0
}

func (l *Local) sweepOrphans(ctx context.Context, now time.Time, boot bool) (int, int64, error) {
	// Order matters: list the directory, then snapshot the in-flight puts,
	// then read the index. A file renamed to its id before the listing is
	// either still in flight at the snapshot or already indexed.
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return 0, 0, fmt.Errorf("sweep %s: %w", l.dir, err)
	}
	l.mu.Lock()
	busy := make(map[string]bool, len(l.inflight))
	for id := range l.inflight {
		busy[id] = true
	}
	l.mu.Unlock()
	ids, err := queryStrings(ctx, l.db, `SELECT id FROM files`)
	if err != nil {
		return 0, 0, fmt.Errorf("sweep %s: %w", l.dir, err)
	}
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
	}

	removed, bytes := 0, int64(0)
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		switch {
		case isUUID(name):
			if known[name] || busy[name] {
				continue
			}
		case strings.HasPrefix(name, tempPrefix) && isUUID(name[len(tempPrefix):]):
			if busy[name[len(tempPrefix):]] {
				continue
			}
			info, err := e.Info()
			if err != nil || (!boot && now.Sub(info.ModTime()) < tempGrace) {
				continue
			}
		default:
			continue
		}
		size := fileSize(filepath.Join(l.dir, name))
		if err := os.Remove(filepath.Join(l.dir, name)); err == nil {
			removed++
			bytes += size
			l.log.Debug("swept orphan file", "name", name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			l.log.Error("sweep orphan file", "name", name, "err", err)
		}
	}
	return removed, bytes, nil
}

// Start sweeps once (the boot sweep: expired files, and orphans and
// temporary files of any age left by a crash) and, if that succeeds, starts a loop that sweeps every
// SweepInterval until ctx is done or Close is called. Sweep errors in the
// loop are logged. Start may be called once.
func (l *Local) Start(ctx context.Context) error {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return errors.New("file store: already started")
	}
	l.started = true
	l.mu.Unlock()

	n, bytes, err := l.sweep(ctx, l.now(), true)
	if err != nil {
		return fmt.Errorf("boot sweep: %w", err)
	}
	l.log.Info("file store swept at boot", "dir", l.dir, "removed", n, "bytes", bytes)

	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.mu.Lock()
	l.stop, l.done = cancel, done
	l.mu.Unlock()
	go l.loop(loopCtx, done)
	return nil
}

func (l *Local) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := l.Sweep(ctx, l.now())
			switch {
			case err != nil && ctx.Err() == nil:
				l.log.Error("file store sweep", "dir", l.dir, "err", err)
			case n > 0:
				l.log.Info("file store swept", "dir", l.dir, "removed", n)
			}
		}
	}
}
