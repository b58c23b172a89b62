package route

import (
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestMain fails the run when a goroutine or a child process outlives the
// tests.
func TestMain(m *testing.M) { testkit.Main(m) }
