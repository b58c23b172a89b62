package nix_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

var update = flag.Bool("update", false, "rewrite nix/vendor-hash.nix")

// TestVendorHash recomputes buildGoModule's vendorHash: the NAR hash of
// `go mod vendor` output, which is exactly what the goModules fixed-output
// derivation stores. It changes with go.mod, go.sum and the set of imported
// packages.
func TestVendorHash(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	root := nixtest.ModuleRoot(t)
	vendor := filepath.Join(t.TempDir(), "vendor")
	vendorCmd := nixtest.Command(t.Context(), "go", "mod", "vendor", "-o", vendor)
	vendorCmd.Dir = root
	// The module's own settings only, like the Nix build.
	vendorCmd.Env = append(vendorCmd.Env, "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := vendorCmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	out, _ := nixtest.Run(t, "nix", "hash", "path", vendor)
	got := strings.TrimSpace(string(out))

	file := filepath.Join(root, "nix", "vendor-hash.nix")
	if *update {
		if err := os.WriteFile(file, []byte(`"`+got+`"`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Trim(strings.TrimSpace(string(data)), `"`); got != want {
		t.Errorf("nix/vendor-hash.nix = %s, but go mod vendor now hashes to %s\n"+
			"go.mod, go.sum or the imports changed; update it with:\n"+
			"  go test ./nix -run TestVendorHash -update", want, got)
	}
}
