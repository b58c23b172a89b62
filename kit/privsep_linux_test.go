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
