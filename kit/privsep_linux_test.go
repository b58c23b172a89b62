package kit

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// TestKitUser: the front runs as the state directory's owner where that
// is a user of its own (an image's glovebox), and just below the
// sessions' uids where it is root's or a session's.
func TestKitUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving the state directory away needs root")
	}
	cfg := sandbox.Config{UIDBase: 300000, UIDCount: 10}
	for _, c := range []struct {
		name     string
		uid, gid int
		want     [2]int
	}{
		{"the image's user", 10001, 10001, [2]int{10001, 10001}},
		{"root's", 0, 0, [2]int{299999, 299999}},
		{"group root", 10001, 0, [2]int{299999, 299999}},
		{"a session's", 300003, 300003, [2]int{299999, 299999}},
		{"a session's group", 10001, 300009, [2]int{299999, 299999}},
		{"just past the sessions'", 300010, 300010, [2]int{300010, 300010}},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, c.uid, c.gid); err != nil {
			t.Fatal(err)
		}
		if uid, gid := kitUser(dir, cfg); [2]int{uid, gid} != c.want {
			t.Errorf("%s (%d:%d): kitUser = %d:%d, want %d:%d", c.name, c.uid, c.gid, uid, gid, c.want[0], c.want[1])
		}
	}
}

// TestCausedBy: the monitor tells an end of ctx that one of its own
// signals caused (passed on from sigs, once) from any other end of ctx.
func TestCausedBy(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGUSR2)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, ctx.Done(), "the SIGUSR2 to end the context")
	if !causedBy(ctx, syscall.SIGTERM, syscall.SIGUSR2) {
		t.Errorf("causedBy(ctx ended by SIGUSR2, SIGTERM, SIGUSR2) = false (cause %v)", context.Cause(ctx))
	}
	if causedBy(ctx, syscall.SIGTERM, syscall.SIGINT) {
		t.Errorf("causedBy(ctx ended by SIGUSR2, SIGTERM, SIGINT) = true")
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	if causedBy(plain, syscall.SIGTERM, syscall.SIGINT) {
		t.Errorf("causedBy(a cancelled context) = true")
	}
}

// TestGiveTree: the monitor gives the state directory to the kit user
// entry by entry through descriptors: what lies below it changes owner,
// what a symbolic or hard link there names outside it does not, nor the
// skipped directory.
func TestGiveTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	base := t.TempDir()
	state, outside := filepath.Join(base, "state"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(state, "a", "b"), filepath.Join(state, "tmp"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(state, "a", "b", "f"), filepath.Join(state, "tmp", "kept"), filepath.Join(outside, "secret"), filepath.Join(outside, "linked")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(state, "a", "to-outside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(outside, "linked"), filepath.Join(state, "hard")); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 299990, 299991
	if err := giveTree(state, filepath.Join(state, "tmp"), uid, gid, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (int, int) {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return int(st.Uid), int(st.Gid)
	}
	for _, p := range []string{state, filepath.Join(state, "a"), filepath.Join(state, "a", "b", "f"), filepath.Join(state, "a", "to-outside")} {
		if u, g := owner(p); u != uid || g != gid {
			t.Errorf("%s is %d:%d, want the kit user's %d:%d", p, u, g, uid, gid)
		}
	}
	for _, p := range []string{outside, filepath.Join(outside, "secret"), filepath.Join(outside, "linked"), filepath.Join(state, "tmp"), filepath.Join(state, "tmp", "kept")} {
		if u, g := owner(p); u != 0 || g != 0 {
			t.Errorf("%s is %d:%d, want it left root's", p, u, g)
		}
	}
}
