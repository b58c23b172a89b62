package nix_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// consumerFlake calls lib.mkBox the way generated flakes do: nixpkgs and
// glovebox as inputs, glovebox's nixpkgs following the caller's.
const consumerFlake = `{
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";
  inputs.glovebox.url = "github:glovebox-dev/glovebox";
  inputs.glovebox.inputs.nixpkgs.follows = "nixpkgs";

  outputs = { self, nixpkgs, glovebox }:
    let
      pkgs = nixpkgs.legacyPackages.x86_64-linux;
      box = args: glovebox.lib.mkBox ({ inherit pkgs; name = "acme/box"; manifest = ./glovebox.json; } // args);
      facts = b: {
        inherit (b.passthru.glovebox) base tag packages pythonPackages env layout;
        inherit (b.standIn.args) fakeRootCommands;
        inherit (b.standIn.args.config) Entrypoint Labels;
        contents = map (c: c.name) b.standIn.args.contents;
        python = map (c: c.standIn.args.packages)
          (builtins.filter (c: (c.standIn.function or "") == "python3.withPackages") b.standIn.args.contents);
      };
    in
    {
      # Everything TestMkBox reads, in one evaluation.
      all = {
        kits = builtins.mapAttrs (s: p: "${p.glovebox-kit}") glovebox.packages;
        cases = builtins.mapAttrs (n: facts) {
          defaults = box { };
          nested = box { packages = [ "python3Packages.rich" "jq" ]; };
          python = box { base = "python"; pythonPackages = [ "rich" "numpy" ]; };
          pythonOnBase = box { pythonPackages = [ "requests" ]; };
          env = box { env = { FOO = "bar"; PATH = "/opt/bin:/bin"; }; };
          tag = box { version = "2.0.0"; tag = "latest"; };
          kit = box { kit = pkgs.jq; };
          mounts = box { manifest = ./mounts.json; };
          aarch64 = glovebox.lib.mkBox { pkgs = nixpkgs.legacyPackages.aarch64-linux; name = "a"; manifest = ./glovebox.json; };
          media = box { base = "media"; };
          specFunction = box {
            base = { pkgs }: { description = "ml tools"; packages = [ pkgs.ripgrep ]; pythonPackages = [ "numpy" ]; env.ML_HOME = "/opt/ml"; };
            baseName = "github:acme/glovebox-bases#ml";
            pythonPackages = [ "rich" ];
          };
          specAttrs = box { base = { packages = [ pkgs.unzip ]; }; };
          fromLib = box { base = glovebox.lib.gloveboxBases.media; baseName = "media"; };
        };
        gloveboxBases = builtins.attrNames glovebox.lib.gloveboxBases;
      };
      errors = {
        unknownBase = box { base = "gpu"; };
        missingPackage = box { packages = [ "nosuchpkg" ]; };
        notAPackage = box { packages = [ "python3Packages" ]; };
        renamedPackage = box { packages = [ "noto-fonts-emoji" ]; };
        missingPython = box { pythonPackages = [ "nosuchpy" ]; };
        reservedEnv = box { env.GLOVEBOX_MANIFEST = "/elsewhere.json"; };
        badManifest = box { manifest = ./not-a-manifest.json; };
        noManifest = glovebox.lib.mkBox { inherit pkgs; name = "x"; };
        specNoPackages = box { base = { pkgs }: { description = "x"; }; baseName = "acme#x"; };
        specPackagesNotList = box { base = { packages = "jq"; }; };
        specNotPackage = box { base = { pkgs }: { packages = [ pkgs.jq "ripgrep" ]; }; };
        specPythonNotString = box { base = { packages = [ ]; pythonPackages = [ 1 ]; }; };
        specEnvNotString = box { base = { packages = [ ]; env.A = [ "x" ]; }; };
        specNotAttrs = box { base = { pkgs }: [ pkgs.jq ]; };
        baseWrongType = box { base = 3; };
        baseNameWrongType = box { base = { packages = [ ]; }; baseName = 1; };
        npmWrongType = box { npm = 3; };
        npmNoLock = box { npm = ./npm-nolock; };
        npmNoIntegrity = box { npm = ./npm-nointegrity; };
        npmStale = box { npm = ./npm-stale; };
        unsupportedSystem = glovebox.lib.mkBox {
          pkgs = pkgs // { stdenv = pkgs.stdenv // { hostPlatform = { system = "riscv64-linux"; }; }; };
          name = "x";
          manifest = ./glovebox.json;
        };
      };
    };
}
`

func consumer(t *testing.T) (dir string, flags []string) {
	t.Helper()
	r := repo(t)
	s := nixtest.StandInNixpkgs(t)
	dir = t.TempDir()
	manifest, err := os.ReadFile(filepath.Join(r, "baseimages", "manifests", "base.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"flake.nix":                         consumerFlake,
		"glovebox.json":                     string(manifest),
		"not-a-manifest.json":               `{"name": "x"}`,
		"npm-nolock/package.json":           `{"name": "x", "dependencies": {"cowsay": "1.6.0"}}`,
		"npm-nointegrity/package.json":      `{"name": "x", "dependencies": {"cowsay": "1.6.0"}}`,
		"npm-nointegrity/package-lock.json": `{"lockfileVersion": 3, "packages": {"": {"dependencies": {"cowsay": "1.6.0"}}, "node_modules/cowsay": {"version": "1.6.0", "resolved": "https://registry.npmjs.org/cowsay/-/cowsay-1.6.0.tgz"}}}`,
		"npm-stale/package.json":            `{"name": "x", "dependencies": {"cowsay": "1.6.0"}}`,
		"npm-stale/package-lock.json":       `{"lockfileVersion": 3, "packages": {"": {"dependencies": {"cowsay": "1.5.0"}}}}`,
		"mounts.json": strings.Replace(string(manifest), `"fs": {`,
			`"fs": {"data": {"path": "/data", "writable": true}, "odd": {"path": "/srv/it's", "writable": false},`, 1),
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flags = append(s.OverrideInput("nixpkgs"), "--override-input", "glovebox", "path:"+r)
	return dir, flags
}

func TestMkBox(t *testing.T) {
	t.Parallel()
	dir, flags := consumer(t)
	type facts struct {
		Base           string            `json:"base"`
		Tag            string            `json:"tag"`
		Packages       []string          `json:"packages"`
		PythonPackages []string          `json:"pythonPackages"`
		Env            map[string]string `json:"env"`
		Entrypoint     []string          `json:"Entrypoint"`
		Labels         map[string]string `json:"Labels"`
		Contents       []string          `json:"contents"`
		Python         [][]string        `json:"python"`
		Layout         []layoutDir       `json:"layout"`
		FakeRoot       string            `json:"fakeRootCommands"`
	}
	var got struct {
		Kits          map[string]string `json:"kits"`
		Cases         map[string]facts  `json:"cases"`
		GloveboxBases []string          `json:"gloveboxBases"`
	}
	nixtest.EvalJSON(t, &got, append(flags, "path:"+dir+"#all")...)
	cases, kits := got.Cases, got.Kits

	t.Run("defaults", func(t *testing.T) {
		c := cases["defaults"]
		if c.Base != "base" || c.Tag != "0.1.0" || c.Labels["org.opencontainers.image.version"] != "0.1.0" {
			t.Errorf("base %q tag %q labels %v, want base, 0.1.0", c.Base, c.Tag, c.Labels)
		}
		if len(c.Python) != 0 {
			t.Errorf("python %v, want none", c.Python)
		}
		if diff := cmp.Diff([]string{kits["x86_64-linux"] + "/bin/glovebox-kit"}, c.Entrypoint); diff != "" {
			t.Errorf("Entrypoint (-want +got):\n%s", diff)
		}
	})
	t.Run("nested attribute paths", func(t *testing.T) {
		c := cases["nested"]
		if !slices.Contains(c.Contents, "rich") || !slices.Contains(c.Contents, "jq") {
			t.Errorf("contents %v, want rich and jq", c.Contents)
		}
		if diff := cmp.Diff([]string{"python3Packages.rich", "jq"}, c.Packages); diff != "" {
			t.Errorf("passthru packages (-want +got):\n%s", diff)
		}
	})
	t.Run("python packages merge with the base's", func(t *testing.T) {
		want := [][]string{{"numpy", "pandas", "pillow", "scipy", "matplotlib", "rich"}}
		if diff := cmp.Diff(want, cases["python"].Python); diff != "" {
			t.Errorf("python3.withPackages (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([][]string{{"requests"}}, cases["pythonOnBase"].Python); diff != "" {
			t.Errorf("python3.withPackages on base (-want +got):\n%s", diff)
		}
	})
	t.Run("env", func(t *testing.T) {
		c := cases["env"]
		if c.Env["FOO"] != "bar" || c.Env["PATH"] != "/opt/bin:/bin" || c.Env["GLOVEBOX_MANIFEST"] != "/etc/glovebox/glovebox.json" {
			t.Errorf("env %v, want FOO=bar, PATH overridden, GLOVEBOX_MANIFEST kept", c.Env)
		}
	})
	t.Run("tag and version", func(t *testing.T) {
		c := cases["tag"]
		if c.Tag != "latest" || c.Labels["org.opencontainers.image.version"] != "2.0.0" {
			t.Errorf("tag %q version label %q, want latest, 2.0.0", c.Tag, c.Labels["org.opencontainers.image.version"])
		}
	})
	t.Run("custom kit", func(t *testing.T) {
		e := cases["kit"].Entrypoint
		if len(e) != 1 || !strings.HasSuffix(e[0], "-jq/bin/jq") {
			t.Errorf("Entrypoint %v, want the given kit's mainProgram", e)
		}
	})
	t.Run("manifest mounts belong to 10001", func(t *testing.T) {
		c := cases["mounts"]
		got := c.Layout[len(c.Layout)-2:]
		want := []layoutDir{{"/data", "0755", uid}, {"/srv/it's", "0755", uid}}
		if diff := cmp.Diff(want, got, cmpSortedDirs()); diff != "" {
			t.Errorf("extra layout (-want +got):\n%s", diff)
		}
		if len(c.Layout) != len(cases["defaults"].Layout)+2 {
			t.Errorf("layout %v, want the defaults plus /data and /srv/it's", c.Layout)
		}
		if want := `chown 10001:10001 './srv/it'\''s'`; !strings.Contains(c.FakeRoot, want) {
			t.Errorf("fakeRootCommands does not quote the path, want %s in:\n%s", want, c.FakeRoot)
		}
	})
	t.Run("base spec function", func(t *testing.T) {
		c, d := cases["specFunction"], cases["defaults"]
		const label = "github:acme/glovebox-bases#ml"
		if c.Base != label || c.Env["GLOVEBOX_BASE"] != label || c.Labels["dev.glovebox.base"] != label {
			t.Errorf("base %q GLOVEBOX_BASE %q label %q, want %q", c.Base, c.Env["GLOVEBOX_BASE"], c.Labels["dev.glovebox.base"], label)
		}
		if c.Env["ML_HOME"] != "/opt/ml" || c.Env["GLOVEBOX_MANIFEST"] != "/etc/glovebox/glovebox.json" {
			t.Errorf("env %v, want the spec's ML_HOME and the fixed env", c.Env)
		}
		// The common layer is there, as for a named base.
		for _, p := range append(slices.Clone(d.Contents), "ripgrep") {
			if !slices.Contains(c.Contents, p) {
				t.Errorf("contents %v lack %s", c.Contents, p)
			}
		}
		if diff := cmp.Diff([][]string{{"numpy", "rich"}}, c.Python); diff != "" {
			t.Errorf("python3.withPackages (-want +got):\n%s", diff)
		}
	})
	t.Run("base spec attrset", func(t *testing.T) {
		c, d := cases["specAttrs"], cases["defaults"]
		if c.Base != "custom" || c.Env["GLOVEBOX_BASE"] != "custom" {
			t.Errorf("base %q GLOVEBOX_BASE %q, want custom without a baseName", c.Base, c.Env["GLOVEBOX_BASE"])
		}
		if diff := cmp.Diff(append(slices.Clone(d.Contents), "unzip"), c.Contents); diff != "" {
			t.Errorf("contents (-want +got):\n%s", diff)
		}
	})
	t.Run("lib.gloveboxBases", func(t *testing.T) {
		if diff := cmp.Diff([]string{"base", "browser", "docs", "media", "python"}, got.GloveboxBases); diff != "" {
			t.Errorf("lib.gloveboxBases (-want +got):\n%s", diff)
		}
		a, b := cases["fromLib"], cases["media"]
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("mkBox with lib.gloveboxBases.media differs from base = \"media\" (-named +spec):\n%s", diff)
		}
	})
	t.Run("kit follows pkgs' system", func(t *testing.T) {
		want := []string{kits["aarch64-linux"] + "/bin/glovebox-kit"}
		if diff := cmp.Diff(want, cases["aarch64"].Entrypoint); diff != "" || kits["aarch64-linux"] == kits["x86_64-linux"] {
			t.Errorf("Entrypoint (-want +got):\n%s", diff)
		}
	})
}

func TestMkBoxErrors(t *testing.T) {
	t.Parallel()
	dir, flags := consumer(t)
	tests := []struct {
		name, want string
	}{
		{"unknownBase", `unknown base "gpu"; use one of: base, browser, docs, media, python, or pass a base spec`},
		{"missingPackage", `package "nosuchpkg" is not an attribute of nixpkgs`},
		{"notAPackage", `"python3Packages" names an attribute of nixpkgs that is not a package`},
		{"renamedPackage", `renamed to 'noto-fonts-color-emoji'`},
		{"missingPython", `python package "nosuchpy" is not in python3Packages`},
		{"reservedEnv", `env may not set GLOVEBOX_MANIFEST`},
		{"badManifest", `not-a-manifest.json is not a glovebox.json`},
		{"noManifest", `without required argument 'manifest'`},
		{"unsupportedSystem", `no glovebox-kit for riscv64-linux`},
		{"specNoPackages", `base acme#x: packages is missing; a base spec is { description; packages; pythonPackages ? [ ]; env ? { }; }`},
		{"specPackagesNotList", `base custom: packages must be a list of packages, got a string`},
		{"specNotPackage", `base custom: packages[1] is a string, not a package; a base spec is`},
		{"specPythonNotString", `base custom: pythonPackages[0] is a int, not a name`},
		{"specEnvNotString", `base custom: env.A must be a string, got a list`},
		{"specNotAttrs", `base custom: the spec is a list, not an attribute set`},
		{"baseWrongType", `base must be one of base, browser, docs, media, python or a base spec ({ pkgs }: { description; packages;`},
		{"baseNameWrongType", `baseName must be a string, got a int`},
		{"npmWrongType", `npm must be a directory with package.json and package-lock.json, got a int`},
		{"npmNoLock", `npm must be a directory with package.json and package-lock.json (dist/npm, written by gbx generate)`},
		{"npmNoIntegrity", `importNpmLock: node_modules/cowsay has no resolved https URL or no integrity`},
		{"npmStale", `importNpmLock: package-lock.json does not match package.json's dependencies`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := nixtest.Try(t.Context(), "nix", append([]string{"eval", "--offline", "--raw"}, append(flags, "path:"+dir+"#errors."+tt.name+".drvPath")...)...)
			if err == nil {
				t.Fatalf("errors.%s evaluated, want an error mentioning %q", tt.name, tt.want)
			}
			if !strings.Contains(string(stderr), tt.want) {
				t.Errorf("errors.%s: %s\nwant it to mention %q", tt.name, stderr, tt.want)
			}
		})
	}
}

func cmpSortedDirs() cmp.Option {
	return cmp.Transformer("sortDirs", func(in []layoutDir) []layoutDir {
		out := slices.Clone(in)
		slices.SortFunc(out, func(a, b layoutDir) int { return strings.Compare(a.Path, b.Path) })
		return out
	})
}
