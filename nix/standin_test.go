package nix_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// TestVerifyNames runs verify.nix, the check of the stand-in's names
// against a real nixpkgs, on the stand-in itself (no problems) and on a
// copy with names removed (those names reported).
func TestVerifyNames(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	stub := nixtest.StandInDir(t)
	tests := []struct {
		name, pkgs string
		want       []string
	}{
		{"stand-in", "p", []string{}},
		{"missing names", `p // {
      jq = throw "removed";
      python3Packages = removeAttrs p.python3Packages [ "numpy" ];
    }`, []string{"jq", "python3Packages.numpy"}},
		{"missing function", `removeAttrs p [ "buildGo126Module" ]`, []string{"function buildGo126Module"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expr := fmt.Sprintf(`let
  lib = import %[1]s/lib.nix;
  p = import %[1]s/pkgs.nix { inherit lib; system = "x86_64-linux"; };
in import %[1]s/verify.nix { nixpkgs = { inherit lib; legacyPackages.x86_64-linux = %[2]s; }; }`, stub, tt.pkgs)
			var got []string
			out, _ := nixtest.Run(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr", expr)
			if err := decodeJSON(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verify.nix (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGoToolchainGuard checks nix/go.nix's guard: the pinned Go must be at
// least go.mod's go directive, and the error says what to change.
func TestGoToolchainGuard(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	root := nixtest.ModuleRoot(t)
	stub := nixtest.StandInDir(t)
	goNix := filepath.Join(root, "nix", "go.nix")
	eval := func(goVersion string) (string, string, error) {
		expr := fmt.Sprintf(`let
  lib = import %[1]s/lib.nix;
  p = import %[1]s/pkgs.nix { inherit lib; system = "x86_64-linux"; };
  pkgs = p // { go_1_26 = p.go_1_26 // { version = %[3]q; }; };
in (import %[2]s { inherit pkgs; version = "0"; }).goDirective`, stub, goNix, goVersion)
		out, stderr, err := nixtest.Try(t.Context(), "nix-instantiate", "--eval", "--strict", "--json", "--expr", expr)
		return strings.TrimSpace(string(out)), string(stderr), err
	}
	got, stderr, err := eval("1.26.2")
	if err != nil {
		t.Fatalf("go.nix with Go 1.26.2: %v\n%s", err, stderr)
	}
	if got != `"1.26.0"` {
		t.Errorf("goDirective = %s, want \"1.26.0\" (go.mod)", got)
	}
	_, stderr, err = eval("1.25.9")
	if err == nil {
		t.Fatal("go.nix accepted Go 1.25.9 for a go 1.26.0 module")
	}
	if want := "go.mod asks for Go 1.26.0 but nix/go.nix uses Go 1.25.9"; !strings.Contains(stderr, want) {
		t.Errorf("error %s\nwant it to mention %q", stderr, want)
	}
}

func decodeJSON(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %q: %w", data, err)
	}
	return nil
}
