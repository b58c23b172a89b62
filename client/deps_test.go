package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the client light: the standard library, the
// protocol, the WebSocket seam and the library behind it, nothing else
// (in particular no SQLite and no flag library).
func TestDependencies(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/glovebox-dev/glovebox/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/glovebox-dev/glovebox/client":          true,
		"github.com/glovebox-dev/glovebox/protocol":        true,
		"github.com/glovebox-dev/glovebox/internal/wsconn": true,
		"github.com/gorilla/websocket":                     true,
	}
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		if !strings.Contains(first, ".") || allowed[pkg] {
			continue // standard library
		}
		t.Errorf("client depends on %s", pkg)
	}
}
