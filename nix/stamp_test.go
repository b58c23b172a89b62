package nix_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestVersionStamp builds gbx the way the Nix derivation does (its
// evaluated ldflags, CGO off, -trimpath) and checks that the binary prints
// the stamped version: -X silently ignores a variable that does not exist.
func TestVersionStamp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds gbx (about 15s with a warm cache)")
	}
	g := packageFacts(t)["x86_64-linux"].Go["gbx"]
	bin := filepath.Join(t.TempDir(), "gbx")
	// A build takes seconds with a warm cache; a cold one on a loaded
	// machine, minutes.
	ctx, cancel := context.WithTimeoutCause(t.Context(), 5*time.Minute, errors.New("gave up after 5m waiting for go build of gbx"))
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", strings.Join(append(g.Ldflags, "-buildid="), " "),
		"-o", bin, "./"+g.SubPackages[0])
	build.Dir = nixtest.ModuleRoot(t)
	build.Env = append(build.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v (%v)\n%s", err, context.Cause(ctx), out)
	}
	out, err := exec.CommandContext(testkit.Context(t, "gbx --version"), bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("gbx --version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "gbx v0.1.0"; got != want {
		t.Errorf("gbx --version = %q, want %q", got, want)
	}
}

// TestStampedVariablesExist checks that every variable the Nix builds
// stamp with -X is a package-level string variable.
func TestStampedVariablesExist(t *testing.T) {
	t.Parallel()
	root := nixtest.ModuleRoot(t)
	for pkg, name := range map[string]string{
		"internal/cli": "Version",
		"kit":          "Version",
	} {
		t.Run(pkg+"."+name, func(t *testing.T) {
			fset := token.NewFileSet()
			files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
				if err != nil {
					t.Fatal(err)
				}
				for _, decl := range file.Decls {
					gen, ok := decl.(*ast.GenDecl)
					if !ok || gen.Tok != token.VAR {
						continue
					}
					for _, spec := range gen.Specs {
						for i, n := range spec.(*ast.ValueSpec).Names {
							if n.Name != name {
								continue
							}
							vs := spec.(*ast.ValueSpec)
							if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
								return
							}
							if i < len(vs.Values) {
								if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									return
								}
							}
							t.Fatalf("%s.%s is not a string variable", pkg, name)
						}
					}
				}
			}
			t.Errorf("package %s has no `var %s = \"dev\"`: nix/go.nix stamps it with -X, which silently ignores a missing variable", pkg, name)
		})
	}
}
