package nixtest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

func TestEnvEnablesFlakes(t *testing.T) {
	t.Setenv("NIX_CONFIG", "sandbox = false")
	var got string
	for _, kv := range nixtest.Env() {
		if v, ok := strings.CutPrefix(kv, "NIX_CONFIG="); ok {
			if got != "" {
				t.Fatalf("Env() has NIX_CONFIG twice")
			}
			got = v
		}
	}
	for _, want := range []string{"sandbox = false", "experimental-features = nix-command flakes", "build-users-group ="} {
		if !strings.Contains(got, want) {
			t.Errorf("Env() NIX_CONFIG = %q, want it to contain %q", got, want)
		}
	}
}

func TestStandInRegisteredAsSource(t *testing.T) {
	s := nixtest.StandInNixpkgs(t)
	if !strings.HasPrefix(s.NarHash, "sha256-") || len(s.NarHash) != len("sha256-")+44 {
		t.Errorf("NarHash = %q, want an SRI sha256", s.NarHash)
	}
	if !strings.HasSuffix(s.StorePath, "-source") {
		t.Errorf("StorePath = %q, want a path named source", s.StorePath)
	}
	if _, err := os.Stat(filepath.Join(s.StorePath, "flake.nix")); err != nil {
		t.Errorf("stand-in not in the store: %v", err)
	}
}

// A github-typed lock carrying the stand-in's narHash evaluates with no
// override and no network: the helper's main promise to flake tests.
func TestGithubLockResolvesToStandIn(t *testing.T) {
	s := nixtest.StandInNixpkgs(t)
	dir := t.TempDir()
	flake := `{
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";
  outputs = { self, nixpkgs }: {
    result = {
      names = builtins.attrNames nixpkgs.legacyPackages;
      fn = (nixpkgs.legacyPackages.x86_64-linux.dockerTools.streamLayeredImage { name = "x"; }).standIn.function;
    };
  };
}
`
	lock := fmt.Sprintf(`{
  "nodes": {
    "nixpkgs": {
      "locked": {
        "lastModified": 1790750587,
        "narHash": %q,
        "owner": "NixOS",
        "repo": "nixpkgs",
        "rev": "78e9c786dc08cd4f3420c2395cd977206a9b1da2",
        "type": "github"
      },
      "original": {
        "owner": "NixOS",
        "ref": "nixos-26.05",
        "repo": "nixpkgs",
        "type": "github"
      }
    },
    "root": {
      "inputs": {
        "nixpkgs": "nixpkgs"
      }
    }
  },
  "root": "root",
  "version": 7
}
`, s.NarHash)
	if err := os.WriteFile(filepath.Join(dir, "flake.nix"), []byte(flake), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "flake.lock"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Names []string `json:"names"`
		Fn    string   `json:"fn"`
	}
	nixtest.EvalJSON(t, &got, "path:"+dir+"#result")
	if !slices.Equal(got.Names, []string{"aarch64-linux", "x86_64-linux"}) {
		t.Errorf("legacyPackages systems = %v, want [aarch64-linux x86_64-linux]", got.Names)
	}
	if got.Fn != "dockerTools.streamLayeredImage" {
		t.Errorf("standIn.function = %q, want dockerTools.streamLayeredImage", got.Fn)
	}
}

// The stand-in rejects what the real nixpkgs rejects, so a wrong call fails
// here rather than on a machine with nixpkgs.
func TestStandInAsserts(t *testing.T) {
	s := nixtest.StandInNixpkgs(t)
	tests := []struct {
		name, apply, want string
	}{
		{"vendorHash missing", `p: (p.buildGoModule { pname = "a"; version = "1"; src = ./.; }).drvPath`, "vendorHash is missing"},
		{"top-level CGO_ENABLED", `p: (p.buildGoModule { pname = "a"; version = "1"; src = ./.; vendorHash = null; CGO_ENABLED = 0; }).drvPath`, "env.CGO_ENABLED"},
		{"renamed emoji font", `p: p.noto-fonts-emoji.drvPath`, "noto-fonts-color-emoji"},
		{"unknown python package", `p: (p.python3.withPackages (ps: [ ps.nosuchthing ])).drvPath`, "nosuchthing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := nixtest.Try(t.Context(), "nix", "eval", "--offline", "--json",
				"path:"+s.Dir+"#legacyPackages.x86_64-linux", "--apply", tt.apply)
			if err == nil {
				t.Fatalf("nix eval succeeded, want an error mentioning %q", tt.want)
			}
			if !strings.Contains(string(stderr), tt.want) {
				t.Errorf("nix eval error = %s, want it to mention %q", stderr, tt.want)
			}
		})
	}
}

// Warnings keeps every warning but the known-harmless ones, matched by
// content, colour codes or not.
func TestWarnings(t *testing.T) {
	stderr := strings.Join([]string{
		"warning: not writing modified lock file of flake 'path:/tmp/x':",
		"• Updated input 'nixpkgs':",
		"\x1b[35;1mwarning:\x1b[0m unknown flake output 'lib'",
		"warning: Git tree '/work/x' is dirty",
		"warning: the group 'nixbld' specified in 'build-users-group' does not exist",
		"warning: input 'glovebox' has an override for a non-existent input 'nixpkgs'",
		"\x1b[35;1mwarning:\x1b[0m unknown setting 'eval-cachee'",
		"error: not a warning",
		"",
	}, "\n")
	got := nixtest.Warnings([]byte(stderr))
	want := []string{
		"warning: input 'glovebox' has an override for a non-existent input 'nixpkgs'",
		"warning: unknown setting 'eval-cachee'",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Warnings() = %q, want %q", got, want)
	}
}
