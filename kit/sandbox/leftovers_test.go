//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestLiveDescendants: the children lists find what the scan of /proc
// finds below a process, grandchildren included, and nothing once they
// are gone.
func TestLiveDescendants(t *testing.T) {
	if _, ok := childrenTree(os.Getpid()); !ok {
		t.Skip("this kernel has no /proc/PID/task/TID/children")
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & sleep 60 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	mine := func(pids []int) []int {
		// The test binary may have other children (none of ours): keep
		// the shell and what descends from it.
		var out []int
		for _, p := range pids {
			if p == cmd.Process.Pid || slices.Contains(descendants(cmd.Process.Pid), p) {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
	testkit.Until(t, "the shell and its two sleeps", func() bool { return len(mine(liveDescendants(self))) == 3 })
	got, want := mine(liveDescendants(self)), mine(descendants(self))
	if !slices.Equal(got, want) {
		t.Errorf("liveDescendants = %v, want %v (the scan of /proc)", got, want)
	}
	grand := descendants(cmd.Process.Pid)
	cmd.Process.Kill()
	for _, p := range grand {
		if pr, err := os.FindProcess(p); err == nil {
			pr.Kill()
		}
	}
	cmd.Wait()
	testkit.Until(t, "none left", func() bool {
		for _, p := range liveDescendants(self) {
			if p == cmd.Process.Pid || slices.Contains(grand, p) {
				return false
			}
		}
		return true
	})
}
