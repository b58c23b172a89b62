package nix_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sbomApply gathers, per base image, how mkBox wires its SBOM: the
// derivation the image copies the SBOM and manifest from, the closure's
// roots, the metadata evaluation writes, and the program that runs.
const sbomApply = `ps: let p = ps.x86_64-linux; in {
  tool = let a = p.glovebox-sbom.standIn.args; in { inherit (a) pname subPackages ldflags env; };
  toolOut = p.glovebox-sbom.outPath;
  boxes = builtins.listToAttrs (map (n: {
    name = n;
    value = let b = p.${n}; s = b.passthru.sbom; a = s.standIn.args; in {
      out = s.outPath;
      inherit (s.standIn) function;
      inherit (a) script manifest;
      tools = map toString a.nativeBuildInputs;
      closureFunction = a.closure.standIn.function;
      roots = map toString a.closure.standIn.args.rootPaths;
      contents = map toString b.standIn.args.contents;
      meta = a.sbomMeta.standIn.args.text;
      config = (builtins.elemAt a.closure.standIn.args.rootPaths (builtins.length a.closure.standIn.args.rootPaths - 1)).standIn.args.text;
      imageConfig = b.standIn.args.config;
      inherit (b.standIn.args) fakeRootCommands;
      sbomPath = b.passthru.glovebox.sbomPath;
    };
  }) [ "box-base" "box-python" "box-docs" ]);
}`

type sbomFacts struct {
	Tool struct {
		Pname       string         `json:"pname"`
		SubPackages []string       `json:"subPackages"`
		Ldflags     []string       `json:"ldflags"`
		Env         map[string]any `json:"env"`
	} `json:"tool"`
	ToolOut string `json:"toolOut"`
	Boxes   map[string]struct {
		Out              string          `json:"out"`
		Function         string          `json:"function"`
		Script           string          `json:"script"`
		Manifest         string          `json:"manifest"`
		Tools            []string        `json:"tools"`
		ClosureFunction  string          `json:"closureFunction"`
		Roots            []string        `json:"roots"`
		Contents         []string        `json:"contents"`
		Meta             string          `json:"meta"`
		Config           string          `json:"config"`
		ImageConfig      json.RawMessage `json:"imageConfig"`
		FakeRootCommands string          `json:"fakeRootCommands"`
		SBOMPath         string          `json:"sbomPath"`
	} `json:"boxes"`
}

// TestImageSBOM checks, against the stand-in nixpkgs, how every image
// gets its SBOM: glovebox-sbom runs over the closureInfo of the image's
// contents and config, with the metadata of its packages, and the image
// installs the SBOM and the stamped manifest from that build. That the
// build itself works is internal/sbom's TestNixBuild.
func TestImageSBOM(t *testing.T) {
	t.Parallel()
	var f sbomFacts
	evalRoot(t, &f, "packages", sbomApply)

	if f.Tool.Pname != "glovebox-sbom" || !cmp.Equal(f.Tool.SubPackages, []string{"cmd/glovebox-sbom"}) ||
		!slices.Contains(f.Tool.Ldflags, "-X main.Version=v0.1.0") || f.Tool.Env["CGO_ENABLED"] != 0.0 {
		t.Errorf("packages.glovebox-sbom = %+v, want cmd/glovebox-sbom alone, static, with its version stamped", f.Tool)
	}
	for name, b := range f.Boxes {
		t.Run(name, func(t *testing.T) {
			if b.Function != "runCommand" || b.ClosureFunction != "closureInfo" {
				t.Errorf("sbom is %s over %s, want runCommand over closureInfo", b.Function, b.ClosureFunction)
			}
			if !cmp.Equal(b.Tools, []string{f.ToolOut}) {
				t.Errorf("the SBOM's build runs %v, want packages.glovebox-sbom %s", b.Tools, f.ToolOut)
			}
			for _, flag := range []string{`--closure "$closure"`, `--meta "$sbomMeta"`, `--manifest "$manifest"`, `--sbom-path '/etc/glovebox/sbom.cdx.json'`, `--out "$out"`} {
				if !strings.Contains(b.Script, flag) {
					t.Errorf("script lacks %s:\n%s", flag, b.Script)
				}
			}
			if !strings.HasSuffix(b.Manifest, "-glovebox.json") {
				t.Errorf("manifest = %s, want the box's glovebox.json", b.Manifest)
			}
			if b.SBOMPath != "/etc/glovebox/sbom.cdx.json" {
				t.Errorf("passthru.glovebox.sbomPath = %s", b.SBOMPath)
			}

			// The closure is the contents' and the config's.
			if len(b.Roots) != len(b.Contents)+1 || !cmp.Equal(b.Roots[:len(b.Contents)], b.Contents) || !strings.HasSuffix(b.Roots[len(b.Roots)-1], "-image-config.json") {
				t.Errorf("closure roots = %v, want the contents %v and the image config", b.Roots, b.Contents)
			}
			var cfg, imageCfg any
			if err := json.Unmarshal([]byte(b.Config), &cfg); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b.ImageConfig, &imageCfg); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(imageCfg, cfg); diff != "" {
				t.Errorf("the config root is not the image's config (-image +root):\n%s", diff)
			}

			var meta struct {
				Name     string   `json:"name"`
				Version  string   `json:"version"`
				Roots    []string `json:"roots"`
				Packages []struct {
					Pname   string            `json:"pname"`
					Outputs map[string]string `json:"outputs"`
				} `json:"packages"`
			}
			if err := json.Unmarshal([]byte(b.Meta), &meta); err != nil {
				t.Fatalf("the metadata is not JSON: %v\n%s", err, b.Meta)
			}
			if meta.Name != "glovebox/"+strings.TrimPrefix(name, "box-") || meta.Version != "0.1.0" || !cmp.Equal(meta.Roots, b.Roots) {
				t.Errorf("metadata name %q version %q roots %v", meta.Name, meta.Version, meta.Roots)
			}
			described := map[string]bool{}
			var pnames []string
			for _, p := range meta.Packages {
				pnames = append(pnames, p.Pname)
				for _, out := range p.Outputs {
					described[out] = true
				}
			}
			for _, c := range b.Contents {
				if !described[c] {
					t.Errorf("the metadata does not describe %s", c)
				}
			}
			if name == "box-python" {
				for _, want := range []string{"python3", "numpy"} {
					if !slices.Contains(pnames, want) {
						t.Errorf("the metadata lacks the Python package %s: %v", want, pnames)
					}
				}
			}

			for _, line := range []string{
				"cp " + b.Out + "/glovebox.json './etc/glovebox/glovebox.json'\n",
				"cp " + b.Out + "/sbom.cdx.json './etc/glovebox/sbom.cdx.json'\n",
				"chmod 0444 './etc/glovebox/glovebox.json' './etc/glovebox/sbom.cdx.json'\n",
			} {
				if !strings.Contains(b.FakeRootCommands, line) {
					t.Errorf("fakeRootCommands lacks %q:\n%s", line, b.FakeRootCommands)
				}
			}
		})
	}
}
