package nix_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// TestCheckImagesRejects feeds nix/check-images.nix images that break each
// promise and expects checks.<system>.images to fail evaluation.
func TestCheckImagesRejects(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	root := nixtest.ModuleRoot(t)
	stub := nixtest.StandInDir(t)
	good := `{
    User = "0:0";
    Entrypoint = [ "/nix/store/x-glovebox-kit/bin/glovebox-kit" ];
    ExposedPorts = { "8080/tcp" = { }; };
    Env = [ "GLOVEBOX_MANIFEST=/etc/glovebox/glovebox.json" ];
  }`
	layout := `[
    { path = "/work"; owner = "10001:10001"; mode = "0755"; }
    { path = "/input"; owner = "10001:10001"; mode = "0755"; }
    { path = "/output"; owner = "10001:10001"; mode = "0755"; }
    { path = "/var/glovebox"; owner = "10001:10001"; mode = "0755"; }
    { path = "/tmp"; owner = "0:0"; mode = "1777"; }
  ]`
	const sbom = `sbomPath = "/etc/glovebox/sbom.cdx.json";`
	tests := []struct {
		name, config, layout, want string
		sbom                       string // passthru.glovebox's sbomPath, passthru.sbom
	}{
		{"good", good, layout, "", sbom},
		{"no sbom", good, layout, "must carry its SBOM", ""},
		{"kit not root", good + ` // { User = "10001:10001"; }`, layout, "User is 10001:10001", sbom},
		{"root-owned input", good, strings.Replace(layout, `"/input"; owner = "10001:10001"`, `"/input"; owner = "0:0"`, 1), "must belong to 10001", sbom},
		{"sticky-less tmp", good, strings.Replace(layout, `"1777"`, `"0777"`, 1), "/tmp must be 1777", sbom},
		{"no port", good + ` // { ExposedPorts = { }; }`, layout, "8080/tcp must be exposed", sbom},
		{"other entrypoint", good + ` // { Entrypoint = [ "/bin/sh" ]; }`, layout, "the entrypoint must be the kit", sbom},
		{"no manifest env", good + ` // { Env = [ ]; }`, layout, "GLOVEBOX_MANIFEST", sbom},
		{"port baked in", good + ` // { Env = [ "GLOVEBOX_MANIFEST=/etc/glovebox/glovebox.json" "GLOVEBOX_PORT=8080" ]; }`, layout, "GLOVEBOX_PORT must not be set", sbom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expr := fmt.Sprintf(`let
  lib = import %[1]s/lib.nix;
  pkgs = import %[1]s/pkgs.nix { inherit lib; system = "x86_64-linux"; };
  image = { passthru.glovebox = { base = "base"; contents = [ ]; layout = %[3]s; config = %[2]s; %[5]s }; }
    // (if %[5]q == "" then { } else { sbom = pkgs.jq; });
in (import %[4]s { inherit pkgs; images.base = image; }).standIn.args.text`,
				stub, tt.config, tt.layout, filepath.Join(root, "nix", "check-images.nix"), tt.sbom)
			_, stderr, err := nixtest.Try(t.Context(), "nix-instantiate", "--eval", "--strict", "--expr", expr)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("check-images rejected a good image: %s", stderr)
			case tt.want != "" && err == nil:
				t.Fatalf("check-images accepted it, want an error mentioning %q", tt.want)
			case tt.want != "" && !strings.Contains(string(stderr), tt.want):
				t.Errorf("check-images: %s\nwant it to mention %q", stderr, tt.want)
			}
		})
	}
}
