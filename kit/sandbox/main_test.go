package sandbox

import (
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestMain fails the run when a goroutine or a child process outlives the
// tests.
func TestMain(m *testing.M) {
	MaybeSupervise() // the test binary serves as its sessions' supervisor
	testkit.Main(m)
}

// TestSupervisorArg0 checks that testkit, which cannot import this
// package, knows a supervisor by the name the sandbox starts it under.
func TestSupervisorArg0(t *testing.T) {
	if testkit.SupervisorArg0 != InitName {
		t.Errorf("testkit.SupervisorArg0 = %q, want %q", testkit.SupervisorArg0, InitName)
	}
}
