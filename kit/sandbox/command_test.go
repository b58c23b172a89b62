//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// A warm session's supervisor is counted ready only once it waits for
// its first request with everything set up: its 4 MiB receive buffer is
// already mapped (outside the Go heap) when Warm returns, so the first
// command waits for neither that nor the garbage collection a heap
// buffer of that size would start.
func TestWarmSupervisorIsReadyBeforeItSaysSo(t *testing.T) {
	b := newBox(t, Config{})
	ss, _ := b.session(t, "ready")
	if err := ss.Warm(); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	pid := ss.SupervisorPid()
	if pid == 0 {
		t.Fatal("SupervisorPid() = 0 after Warm")
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !hasMapping(string(maps), maxCtlMsg) {
		t.Errorf("the supervisor's maps, right after Warm, hold no anonymous mapping of %d bytes (its receive buffer):\n%s", maxCtlMsg, maps)
	}
}

// hasMapping reports whether maps (a /proc/PID/maps) holds an anonymous
// read-write private mapping of exactly size bytes.
func hasMapping(maps string, size uint64) bool {
	for line := range strings.Lines(maps) {
		f := strings.Fields(line)
		if len(f) != 5 || f[1] != "rw-p" {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err == nil && hi-lo == size {
			return true
		}
	}
	return false
}
