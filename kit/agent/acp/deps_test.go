package acp

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the package on the standard library, the two
// contracts it implements and the sandbox that starts its processes (with
// x/sys), so the kit binary stays small.
func TestDependencies(t *testing.T) {
	t.Parallel()
	// go test puts its GOROOT/bin first on the test's PATH.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/glovebox-dev/glovebox/kit/agent/acp": true,
		"github.com/glovebox-dev/glovebox/kit/agent":     true,
		"github.com/glovebox-dev/glovebox/protocol":      true,
		"github.com/glovebox-dev/glovebox/kit/sandbox":   true,
		"golang.org/x/sys/unix":                          true,
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("kit/agent/acp depends on %s; it may use only the standard library, kit/agent, kit/sandbox (with x/sys) and protocol", p)
		}
	}
}
