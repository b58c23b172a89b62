package generator

import (
	"fmt"
	"slices"
	"strings"
)

// DevEnv is what the box's image would put on PATH, for gbx dev to run a
// box's prompts with the same tools without building the image.
type DevEnv struct {
	// Packages are nixpkgs attribute paths: the base image's and
	// [packages].nix, without the Python libraries.
	Packages []string
	// Python are python3Packages names: the base's and [packages].pip,
	// with python3Packages.X of [packages].nix.
	Python []string
}

// DevEnv returns the box's packages. A base from another flake
// contributes only the common base's packages (its own list is in that
// flake).
func (c *Config) DevEnv() DevEnv {
	var d DevEnv
	add := func(list *[]string, names ...string) {
		for _, n := range names {
			if !slices.Contains(*list, n) {
				*list = append(*list, n)
			}
		}
	}
	add(&d.Packages, baseSpecs["base"].Nix...)
	if spec, ok := baseSpecs[c.Base]; ok && c.BaseFlake == "" {
		add(&d.Packages, spec.Nix...)
		add(&d.Python, spec.Pip...)
	}
	for _, p := range c.Packages.Nix {
		if name, ok := strings.CutPrefix(p, "python3Packages."); ok && !strings.Contains(name, ".") {
			add(&d.Python, name)
		} else {
			add(&d.Packages, p)
		}
	}
	add(&d.Python, c.Packages.Pip...)
	return d
}

// NixExpr is a Nix expression for one environment (pkgs.buildEnv) holding
// the packages, and a Python with the libraries, from nixpkgs (a flake
// reference; empty means the pin generated flakes use). It needs
// --impure (builtins.currentSystem).
func (d DevEnv) NixExpr(name, nixpkgs string) (string, error) {
	if nixpkgs == "" {
		pin, ok := NixpkgsPin(DefaultBranch)
		if !ok {
			return "", fmt.Errorf("no nixpkgs pin for %s", DefaultBranch)
		}
		nixpkgs = "github:" + pin.Owner + "/" + pin.Repo + "/" + pin.Rev
	}
	python := "[ ]"
	if len(d.Python) > 0 {
		python = "[ (pkgs.python3.withPackages (ps: map (n: ps.${n}) " + nixlist(d.Python) + ")) ]"
	}
	return `let
  pkgs = (builtins.getFlake ` + nixstr(nixpkgs) + `).legacyPackages.${builtins.currentSystem};
  attr = p: pkgs.lib.attrByPath (pkgs.lib.splitString "." p) (throw "package ${p} is not an attribute of nixpkgs") pkgs;
in
pkgs.buildEnv {
  name = ` + nixstr("glovebox-dev-"+name) + `;
  paths = map attr ` + nixlist(d.Packages) + ` ++ ` + python + `;
  ignoreCollisions = true;
}
`, nil
}
