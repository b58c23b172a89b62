package storage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// sweepFixture fills a store with one file of every kind a sweep judges and
// returns the names it should keep and remove.
func sweepFixture(t *testing.T, l *Local, now time.Time) (keep, gone []string) {
	t.Helper()
	live := put(t, l, "live.txt", []byte("live"), map[string]any{"ttl": "1h"})
	expired := put(t, l, "expired.txt", []byte("old"), map[string]any{"ttl": "1s"})
	write := func(name string, age time.Duration) string {
		p := filepath.Join(l.Dir(), name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		mt := now.Add(-age)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		return name
	}
	orphan := write("0f8fad5b-d9cb-469f-a165-70867728950e", 0)
	oldTemp := write(tempPrefix+"1f8fad5b-d9cb-469f-a165-70867728950e", 2*time.Hour)
	freshTemp := write(tempPrefix+"2f8fad5b-d9cb-469f-a165-70867728950e", time.Minute)
	unrelated := write("README", 48*time.Hour)
	if err := os.Mkdir(filepath.Join(l.Dir(), "3f8fad5b-d9cb-469f-a165-70867728950e"), 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{live, freshTemp, unrelated, "3f8fad5b-d9cb-469f-a165-70867728950e"}, []string{expired, orphan, oldTemp}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSweep(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{})
	keep, gone := sweepFixture(t, l, clk.Now())
	clk.Advance(2 * time.Second) // past expired's ttl_at
	n, err := l.Sweep(t.Context(), clk.Now())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if n != len(gone) {
		t.Errorf("Sweep removed %d, want %d", n, len(gone))
	}
	names := dirNames(t, l.Dir())
	slices.Sort(names)
	want := slices.Clone(keep)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("after Sweep the directory holds %q, want %q", names, want)
	}
	if rowCount(t, l, gone[0]) != 0 {
		t.Error("the expired file's row survived the sweep")
	}
	if n, err := l.Sweep(t.Context(), clk.Now()); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0, nil", n, err)
	}
}

// The sweep honours v1's strict rule: a file is expired once ttl_at < now.
func TestSweepBoundary(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{})
	id := put(t, l, "a.txt", []byte("a"), map[string]any{"ttl": "10s"})
	if n, _ := l.Sweep(t.Context(), clk.Now().Add(10*time.Second)); n != 0 || !fileExists(t, l, id) {
		t.Fatalf("Sweep at ttl_at removed %d files, want 0", n)
	}
	if n, _ := l.Sweep(t.Context(), clk.Now().Add(11*time.Second)); n != 1 || fileExists(t, l, id) {
		t.Fatalf("Sweep after ttl_at removed %d files, want 1", n)
	}
}

// Start sweeps before it returns: orphans and temporary files left by a
// crash, and files that expired while the kit was down, are gone at boot.
func TestStartSweepsAtBoot(t *testing.T) {
	t.Parallel()
	l, clk := newLocal(t, LocalOptions{SweepInterval: time.Hour})
	keep, gone := sweepFixture(t, l, clk.Now())
	// At boot no Put of this process writes: a temp file of any age is a
	// crash's leftover.
	fresh := tempPrefix + "2f8fad5b-d9cb-469f-a165-70867728950e"
	keep = slices.DeleteFunc(keep, func(s string) bool { return s == fresh })
	gone = append(gone, fresh)
	clk.Advance(2 * time.Second)
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	names := dirNames(t, l.Dir())
	for _, g := range gone {
		if slices.Contains(names, g) {
			t.Errorf("%s survived the boot sweep", g)
		}
	}
	for _, k := range keep {
		if !slices.Contains(names, k) {
			t.Errorf("%s was removed by the boot sweep", k)
		}
	}
	if err := l.Start(t.Context()); err == nil {
		t.Error("second Start succeeded")
	}
}

// The loop sweeps every interval, on the store's clock, until Close.
func TestSweepLoop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l, err := OpenLocal(t.Context(), filepath.Join(dir, "files"), filepath.Join(dir, "files.db"), LocalOptions{
			SweepInterval: time.Minute,
			Logger:        testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		short := put(t, l, "short.txt", []byte("s"), map[string]any{"ttl": "90s"})
		long := put(t, l, "long.txt", []byte("l"), map[string]any{"ttl": "3m"})

		time.Sleep(90 * time.Second) // one tick, at 60s: nothing expired yet
		synctest.Wait()
		if !fileExists(t, l, short) {
			t.Fatal("the first tick removed a file that was not expired")
		}
		time.Sleep(60 * time.Second) // the tick at 120s: short expired at 90s
		synctest.Wait()
		if fileExists(t, l, short) || !fileExists(t, l, long) {
			t.Fatalf("after 150s: short kept %v (want false), long kept %v (want true)", fileExists(t, l, short), fileExists(t, l, long))
		}
		time.Sleep(2 * time.Minute) // ticks at 180s (long's ttl_at, kept) and 240s
		synctest.Wait()
		if fileExists(t, l, long) {
			t.Fatal("long survived past its TTL and a tick")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// synctest.Test fails if the loop or the database pool outlived Close.
	})
}
