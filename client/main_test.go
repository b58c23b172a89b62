package client_test

import (
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// TestMain fails the run when a goroutine or a child process outlives the
// tests.
func TestMain(m *testing.M) {
	sandbox.MaybeSupervise() // the test binary serves as its sessions' supervisor
	testkit.Main(m)
}
