package nix_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// root is a copy of the repository made once for the whole package: the
// root flake is evaluated as path:<root>, so files not yet added to git
// are seen too.
var root struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if root.dir != "" {
		os.RemoveAll(root.dir)
	}
	os.Exit(code)
}

// repo returns the shared copy of the repository.
func repo(t *testing.T) string {
	t.Helper()
	nixtest.Require(t)
	root.once.Do(func() {
		src, err := nixtest.FindModuleRoot()
		if err != nil {
			root.err = err
			return
		}
		dir, err := os.MkdirTemp("", "glovebox-flake-")
		if err != nil {
			root.err = err
			return
		}
		root.dir = dir
		root.err = nixtest.CopyTreeTo(src, dir, nixtest.RepoFiles)
	})
	if root.err != nil {
		t.Fatal(fmt.Errorf("copy the repository: %w", root.err))
	}
	return root.dir
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
