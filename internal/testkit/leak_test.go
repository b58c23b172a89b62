package testkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// leakEnv makes TestLeaky leave a goroutine and a process behind, in a
// child test binary.
const leakEnv = "TESTKIT_LEAKY"

// TestLeaky leaks on purpose when leakEnv is set; otherwise it is skipped.
func TestLeaky(t *testing.T) {
	if os.Getenv(leakEnv) == "" {
		t.Skip("runs only in TestMainFailsOnLeaks's child")
	}
	leakWait = 200 * time.Millisecond
	go leakyForever(make(chan struct{}))
	if err := exec.Command("sh", "-c", "exec sleep 300 # "+os.Getenv(leakEnv)).Start(); err != nil {
		t.Fatal(err)
	}
}

func leakyForever(never chan struct{}) { <-never }

// TestMainFailsOnLeaks: a passing test that leaves a goroutine and a child
// process behind fails the run, and the report names both.
func TestMainFailsOnLeaks(t *testing.T) {
	marker := "testkit-leak-" + strings.ReplaceAll(t.Name(), "/", "-")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaky$", "-test.count=1")
	cmd.Env = append(os.Environ(), leakEnv+"="+marker)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := Exit(t, cmd, "the leaky test binary")
	for _, pid := range WithCmdline(marker) {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
	}
	if err == nil {
		t.Fatalf("the leaky test binary passed; output:\n%s", out.String())
	}
	for _, want := range []string{"goroutines left running", "testkit.leakyForever", "processes left running", "sleep 300"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the leaky run's output lacks %q:\n%s", want, out.String())
		}
	}
}
