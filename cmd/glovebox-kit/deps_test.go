package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the kit binary's import graph small: the standard
// library, gorilla/websocket, x/sync, modernc.org/sqlite (with what it
// needs) and the repository's own runtime packages, never the CLI, the
// client or the generator.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := []string{
		"github.com/glovebox-dev/glovebox/",
		"github.com/gorilla/websocket",
		"golang.org/x/sync/",
		"modernc.org/",
		// modernc.org/sqlite's own dependencies.
		"golang.org/x/sys/",
		"github.com/dustin/go-humanize",
		"github.com/google/uuid",
		"github.com/remyoudompheng/bigfft",
		"github.com/ncruces/go-strftime",
		"github.com/mattn/go-isatty",
	}
	forbidden := []string{"/internal/cli", "/client", "/generator", "spf13/pflag", "go-cmp"}
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		if !strings.Contains(first, ".") {
			continue // standard library
		}
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(pkg+"/", a) || strings.HasPrefix(pkg, a)
		}
		for _, f := range forbidden {
			ok = ok && !strings.Contains(pkg, f)
		}
		if !ok {
			t.Errorf("glovebox-kit imports %s", pkg)
		}
	}
}
