//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// counting starts a process in ss that rewrites dir/counter with a
// growing number, and returns a func reading it.
func counting(t *testing.T, ss *Session, dir string) (*Process, func() string) {
	t.Helper()
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > counter.tmp; mv counter.tmp counter; done"},
		Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "counter"))
		return strings.TrimSpace(string(b))
	}
	return p, read
}

// advances waits (up to 10s) until read's value changes from what it
// was, and reports whether it did.
func advances(read func() string) bool {
	was := read()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if v := read(); v != "" && v != was {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// TestPauseFreezesAndWakes: a paused session's processes make no
// progress; Wake, or a new command, lets them go on; KillAll and Close
// end a paused session.
func TestPauseFreezesAndWakes(t *testing.T) {
	b := newBox(t, Config{})
	if !b.sb.Report().Has(LayerCgroup) {
		t.Skip("no cgroups here")
	}
	ss, dir := b.session(t, "pause")
	p, read := counting(t, ss, dir)
	if !advances(read) {
		t.Fatal("the counter never moved")
	}
	if err := ss.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if !ss.Paused() {
		t.Fatal("Paused is false after Pause")
	}
	frozen := read()
	time.Sleep(200 * time.Millisecond)
	if v := read(); v != frozen {
		t.Fatalf("the counter moved from %s to %s while paused", frozen, v)
	}
	if err := ss.Wake(); err != nil {
		t.Fatalf("Wake: %v", err)
	}
	if !advances(read) {
		t.Fatal("the counter did not move after Wake")
	}
	// A command wakes a paused session.
	if err := ss.Pause(); err != nil {
		t.Fatal(err)
	}
	if out, st := run(t, ss, dir, "echo awake"); st.Code != 0 || out != "awake\n" {
		t.Fatalf("a command on a paused session: %q %v", out, st)
	}
	if ss.Paused() || !advances(read) {
		t.Fatal("the command did not wake the session")
	}
	// Ended while paused: nothing hangs, nothing is left.
	if err := ss.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { ss.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close of a paused session did not return within 30s")
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the paused session's process outlived Close")
	}
}

// TestPauseWithoutFreezer: a session without a cgroup says it cannot be
// paused, and goes on.
func TestPauseWithoutFreezer(t *testing.T) {
	b := newBox(t, Config{NoCgroup: true})
	ss, dir := b.session(t, "nopause")
	if err := ss.Pause(); !errors.Is(err, ErrCannotPause) {
		t.Fatalf("Pause without a cgroup = %v, want ErrCannotPause", err)
	}
	if out, st := run(t, ss, dir, "echo still"); st.Code != 0 || out != "still\n" {
		t.Fatalf("%q %v", out, st)
	}
}
