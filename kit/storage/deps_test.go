package storage

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The kit binary may import only the standard library, gorilla/websocket,
// x/sync and modernc.org/sqlite: this package's share of that budget is the
// standard library, protocol and SQLite (with what SQLite itself needs).
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	list := func(pkg string) []string {
		out, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	allowed := list("modernc.org/sqlite")
	for _, p := range list(".") {
		switch {
		case p == "github.com/glovebox-dev/glovebox/kit/storage", p == "github.com/glovebox-dev/glovebox/protocol":
		case slices.Contains(allowed, p):
		default:
			t.Errorf("kit/storage depends on %s, outside its budget (stdlib, protocol, modernc.org/sqlite)", p)
		}
	}
}
