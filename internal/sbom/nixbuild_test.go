package sbom

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestNixBuild builds nix/sbom.nix with Nix for real (testdata/build.nix:
// a two-path closure, nixpkgs' closureInfo script, glovebox-sbom built
// here) and checks the SBOM against what Nix itself says of the paths.
func TestNixBuild(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	if os.Getuid() != 0 {
		// The builders use the machine's /bin/sh and jq (there is no
		// nixpkgs to take them from), which needs sandbox = false: only
		// root, or a user the nix daemon trusts, may set it.
		t.Skip("building without nixpkgs needs --option sandbox false, which needs root")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		if _, ci := os.LookupEnv("CI"); ci {
			t.Fatal("jq is not on PATH and CI is set: install it (apt-get install -y jq)")
		}
		t.Skip("jq is not on PATH (closureInfo's script needs it; set CI to make this a failure)")
	}
	root := nixtest.ModuleRoot(t)
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", filepath.Join(tool, "bin", "glovebox-sbom"), "./cmd/glovebox-sbom")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	manifest := filepath.Join(dir, "glovebox.json")
	if err := os.WriteFile(manifest, []byte(`{"name": "box", "provenance": {"gbx": "v0.1.0"}, "protocol_version": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, _ := nixtest.Run(t, "nix-build", filepath.Join(root, "internal", "sbom", "testdata", "build.nix"),
		"--no-out-link", "--option", "sandbox", "false", "--option", "substituters", "",
		"--arg", "root", root, "--arg", "tool", tool, "--arg", "manifest", manifest)
	result := strings.TrimSpace(string(out))
	doc, err := os.ReadFile(filepath.Join(result, SBOMFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := validateBOM(t, doc); err != nil {
		t.Fatalf("the SBOM is not CycloneDX 1.6: %v\n%s", err, doc)
	}
	var bom Document
	if err := json.Unmarshal(doc, &bom); err != nil {
		t.Fatal(err)
	}

	// What Nix says of the closure, to hold the SBOM to.
	var appa string
	for _, c := range bom.Components {
		if c.Name == "appa" {
			appa = c.BOMRef
		}
	}
	if appa == "" {
		t.Fatalf("no component appa in\n%s", doc)
	}
	info, _ := nixtest.Run(t, "nix", "path-info", "--json", "--recursive", appa)
	var paths []struct {
		Path       string   `json:"path"`
		NarHash    string   `json:"narHash"`
		NarSize    int64    `json:"narSize"`
		References []string `json:"references"`
	}
	if err := json.Unmarshal(info, &paths); err != nil {
		t.Fatalf("nix path-info: %v\n%s", err, info)
	}
	var closure []StorePath
	type row struct{ Name, Version, Type, Purl, Licenses, Output, Hash, Size string }
	want := map[string]row{}
	for _, p := range paths {
		h, err := ParseNarHash(p.NarHash)
		if err != nil {
			t.Fatal(err)
		}
		closure = append(closure, StorePath{Path: p.Path, NarHash: h, NarSize: p.NarSize})
		r := row{"libb", "1.0", "application", "pkg:nix/libb@1.0", `[{"license":{"name":"Some License"}}]`, "lib", "", ""}
		if p.Path == appa {
			r = row{"appa", "2.0", "application", "pkg:nix/appa@2.0", `[{"expression":"MIT"}]`, "out", "", ""}
		}
		r.Hash, r.Size = hex.EncodeToString(h[:]), strconv.FormatInt(p.NarSize, 10)
		want[p.Path] = r
	}
	got := map[string]row{}
	for _, c := range bom.Components {
		props := map[string]string{}
		for _, p := range c.Properties {
			props[p.Name] = p.Value
		}
		lic, _ := json.Marshal(c.Licenses)
		got[c.BOMRef] = row{c.Name, c.Version, c.Type, c.Purl, string(lic), props["nix:output"], c.Hashes[0].Content, props["nix:nar_size"]}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("components against nix path-info (-want +got):\n%s", diff)
	}
	wantDeps, gotDeps := map[string][]string{"image": {appa}}, map[string][]string{}
	for _, p := range paths {
		wantDeps[p.Path] = nil
		for _, r := range p.References {
			if r != p.Path {
				wantDeps[p.Path] = append(wantDeps[p.Path], r)
			}
		}
	}
	for _, d := range bom.Dependencies {
		gotDeps[d.Ref] = d.DependsOn
	}
	if diff := cmp.Diff(wantDeps, gotDeps); diff != "" || len(wantDeps[appa]) != 1 {
		t.Errorf("dependencies against nix path-info's references (-want +got):\n%s", diff)
	}

	stamped, err := os.ReadFile(filepath.Join(result, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := protocol.ParseManifest(stamped)
	if err != nil {
		t.Fatal(err)
	}
	wantProv := &protocol.Provenance{
		Gbx: "v0.1.0", ClosureSHA256: ClosureHash(closure), ClosurePaths: 2,
		SBOM: "/etc/glovebox/sbom.cdx.json", SBOMSHA256: SHA256(doc),
	}
	if diff := cmp.Diff(wantProv, m.Provenance); diff != "" {
		t.Errorf("stamped provenance (-want +got):\n%s", diff)
	}
}
