package nix_test

import (
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m, testkit.After(nixtest.RemoveRepoCopy))
}

// repo returns the copy of the repository shared by the package's tests:
// the root flake is evaluated as path:<repo>, so files not yet added to
// git are seen too.
func repo(t *testing.T) string {
	t.Helper()
	nixtest.Require(t)
	return nixtest.RepoCopy(t)
}

// evalRoot evaluates attr of the root flake, with nixpkgs replaced by the
// stand-in through --override-input (the real lock names the real
// nixpkgs' narHash), applies apply and decodes the JSON into v.
func evalRoot(t *testing.T, v any, attr, apply string) {
	t.Helper()
	dir := repo(t)
	s := nixtest.StandInNixpkgs(t)
	args := append(s.OverrideInput("nixpkgs"), "path:"+dir+"#"+attr)
	if apply != "" {
		args = append(args, "--apply", apply)
	}
	nixtest.EvalJSON(t, v, args...)
}
