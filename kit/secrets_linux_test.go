//go:build linux

package kit

import (
	"bytes"
	"os"
	"testing"
)

// The kernel's copy of the environment, which /proc/PID/environ shows, is
// zeroed in place; the process's own environment stays as it was.
func TestClearEnvironBlock(t *testing.T) {
	t.Setenv("GLOVEBOX_TEST_SECRET", "do-not-show")
	before := os.Environ()
	if err := clearEnvironBlock(); err != nil {
		t.Fatalf("clearEnvironBlock: %v", err)
	}
	b, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	if rest := bytes.Trim(b, "\x00"); len(rest) > 0 {
		t.Errorf("/proc/self/environ after clearEnvironBlock holds %q, want only zeros", rest)
	}
	if got := os.Getenv("GLOVEBOX_TEST_SECRET"); got != "do-not-show" {
		t.Errorf("Getenv after clearEnvironBlock = %q, want the value set before", got)
	}
	if len(os.Environ()) != len(before) {
		t.Errorf("the environment went from %d variables to %d", len(before), len(os.Environ()))
	}
}
