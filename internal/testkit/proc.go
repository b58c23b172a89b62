package testkit

// Finding processes by what they run or carry, for tests that check that
// nothing outlives what should have ended it.

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// WithCmdline lists the processes whose command line contains marker.
func WithCmdline(marker string) []int {
	return find("cmdline", func(b []byte) bool { return bytes.Contains(b, []byte(marker)) })
}

// WithEnv lists the processes whose environment holds the exact entry kv
// ("NAME=value"). Reading another user's environment needs root.
func WithEnv(kv string) []int {
	return find("environ", func(b []byte) bool {
		for _, e := range bytes.Split(b, []byte{0}) {
			if string(e) == kv {
				return true
			}
		}
		return false
	})
}

func find(file string, match func([]byte) bool) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/" + file); err == nil && match(b) {
			out = append(out, pid)
		}
	}
	return out
}

// Executable is the running test binary's path, symbolic links resolved:
// what /proc/PID/exe shows of a process it starts as itself, and the
// directory beside which it may install other binaries.
func Executable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		t.Fatal(err)
	}
	return exe
}
