package sessionbench

import (
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeSupervise() // the test binary serves as its sessions' supervisor
	testkit.Main(m)
}
