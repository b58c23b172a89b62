package sbom

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

// encodeNix32 is Nix's base32 (printHash32): the first character holds
// the highest bits.
func encodeNix32(b []byte) string {
	n := (len(b)*8-1)/5 + 1
	var sb strings.Builder
	for k := n - 1; k >= 0; k-- {
		bit := k * 5
		i, j := bit/8, uint(bit%8)
		c := b[i] >> j
		if i < len(b)-1 {
			c |= b[i+1] << (8 - j)
		}
		sb.WriteByte(nix32Alphabet[c&0x1f])
	}
	return sb.String()
}

// storePath makes a plausible store path for name.
func storePath(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "/nix/store/" + encodeNix32(sum[:20]) + "-" + name
}

func narHash(name string) [32]byte { return sha256.Sum256([]byte("nar " + name)) }

// closure is a tiny closure: an application, the glibc it links and a
// data package, in the shape closureInfo writes.
type closure struct {
	app, glibc, tz, kit string
	paths               []StorePath
}

func newClosure() closure {
	c := closure{
		app:   storePath("jq-1.7.1-bin"),
		glibc: storePath("glibc-2.40-66"),
		tz:    storePath("tzdata-2025b"),
		kit:   storePath("glovebox-kit-0.1.0"),
	}
	c.paths = []StorePath{
		{Path: c.app, NarHash: narHash("jq"), NarSize: 1000, References: []string{c.glibc}},
		{Path: c.glibc, NarHash: narHash("glibc"), NarSize: 30000000},
		{Path: c.tz, NarHash: narHash("tz"), NarSize: 42},
		{Path: c.kit, NarHash: narHash("kit"), NarSize: 9000000, References: []string{c.tz}},
	}
	return c
}

// registration writes paths as closureInfo does, each NAR hash in the
// given encoding.
func registration(paths []StorePath, encode func([32]byte) string) string {
	var b strings.Builder
	for _, p := range paths {
		refs := append([]string{p.Path}, p.References...) // Nix lists a self-reference too
		fmt.Fprintf(&b, "%s\n%s\n%d\n\n%d\n", p.Path, encode(p.NarHash), p.NarSize, len(refs))
		for _, r := range refs {
			b.WriteString(r + "\n")
		}
	}
	return b.String()
}

func nix32Hash(h [32]byte) string { return "sha256:" + encodeNix32(h[:]) }
func hexHash(h [32]byte) string   { return "sha256:" + hex.EncodeToString(h[:]) }
func sriHash(h [32]byte) string   { return "sha256-" + base64.StdEncoding.EncodeToString(h[:]) }

func TestParseRegistration(t *testing.T) {
	t.Parallel()
	c := newClosure()
	for name, enc := range map[string]func([32]byte) string{"nix32": nix32Hash, "hex": hexHash, "sri": sriHash} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRegistration(strings.NewReader(registration(c.paths, enc)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.paths, got); diff != "" {
				t.Errorf("ParseRegistration (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNix32 checks the nix32 decoder against what Nix 2.8 prints for
// `nix hash to-base32 --type sha256 <hex>`.
func TestNix32(t *testing.T) {
	t.Parallel()
	for hx, b32 := range map[string]string{
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad": "1b8m03r63zqhnjf7l5wnldhh7c134ap5vpj0850ymkq1iyzicy5s", // sha256("abc")
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855": "0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73", // sha256("")
	} {
		got, err := ParseNarHash("sha256:" + b32)
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(got[:]) != hx {
			t.Errorf("ParseNarHash(sha256:%s) = %x, want %s", b32, got, hx)
		}
		if enc := encodeNix32(got[:]); enc != b32 {
			t.Errorf("encodeNix32(%s) = %s, want %s", hx, enc, b32)
		}
	}
}

func TestParseRegistrationErrors(t *testing.T) {
	t.Parallel()
	c := newClosure()
	good := registration(c.paths, nix32Hash)
	h := nix32Hash(narHash("x"))
	tests := []struct{ name, in, want string }{
		{"not a store path", "relative/path\n", "is not a store path"},
		{"truncated", c.app + "\n" + h + "\n", "the file ends where the NAR size"},
		{"bad hash", c.app + "\nmd5:abc\n1\n\n0\n", "not a sha256 hash"},
		{"bad nix32", c.app + "\nsha256:" + strings.Repeat("e", 52) + "\n1\n\n0\n", "not nix32"},
		{"nix32 overflow", c.app + "\nsha256:" + strings.Repeat("z", 52) + "\n1\n\n0\n", "not nix32"},
		{"short hash", c.app + "\nsha256:abc\n1\n\n0\n", "has 3 digits"},
		{"bad size", c.app + "\n" + h + "\n-1\n\n0\n", "is not a size"},
		{"bad count", c.app + "\n" + h + "\n1\n\nmany\n", "is not a count"},
		{"missing reference", c.app + "\n" + h + "\n1\n\n1\n", "the file ends where a reference"},
		{"dangling reference", c.app + "\n" + h + "\n1\n\n1\n" + c.glibc + "\n", "which the closure does not list"},
		{"twice", good + good, "is listed twice"},
		{"long line", strings.Repeat("x", 10000), "token too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRegistration(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseRegistration = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func FuzzParseRegistration(f *testing.F) {
	c := newClosure()
	f.Add(registration(c.paths, nix32Hash))
	f.Add(registration(c.paths, sriHash))
	f.Add(c.app + "\nsha256:" + strings.Repeat("0", 64) + "\n1\n\n1\n" + c.app + "\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		paths, err := ParseRegistration(strings.NewReader(in))
		if err != nil {
			return
		}
		// What parses is a closure: unique paths, references inside it.
		seen := map[string]bool{}
		for _, p := range paths {
			if seen[p.Path] {
				t.Fatalf("%s twice", p.Path)
			}
			seen[p.Path] = true
		}
		for _, p := range paths {
			for _, r := range p.References {
				if !seen[r] || r == p.Path {
					t.Fatalf("%s: reference %s", p.Path, r)
				}
			}
		}
		if _, err := Build(paths, Meta{Name: "x"}, nil, Tool{Name: "t"}); err != nil {
			t.Fatalf("Build of a parsed closure: %v", err)
		}
	})
}

func (c closure) meta() Meta {
	return Meta{
		Name: "acme/box", Version: "0.1.0",
		Roots: []string{c.kit, c.app},
		Packages: []Package{
			{
				Pname: "jq", Version: "1.7.1", Description: "A lightweight JSON processor",
				Homepage: "https://jqlang.github.io/jq/",
				Licenses: []PackageLicense{{SpdxID: "MIT", FullName: "MIT License"}},
				Outputs:  map[string]string{"bin": c.app, "out": storePath("jq-1.7.1")},
			},
			{
				Pname: "glovebox-kit", Version: "0.1.0",
				Licenses: []PackageLicense{{FullName: "Unfree"}, {SpdxID: "MIT", URL: "https://spdx.org/licenses/MIT.html"}},
				Outputs:  map[string]string{"out": c.kit},
			},
		},
	}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	c := newClosure()
	prov := &protocol.Provenance{
		ConfigSHA256: strings.Repeat("1", 64), Gbx: "v0.1.0",
		Inputs:        map[string]protocol.LockedInput{"nixpkgs": {URL: "github:NixOS/nixpkgs/nixos-26.05", Rev: strings.Repeat("a", 40), NarHash: sriHash(narHash("src"))}},
		ClosureSHA256: ClosureHash(c.paths), ClosurePaths: len(c.paths),
	}
	doc, err := Build(c.paths, c.meta(), prov, Tool{Name: "glovebox-sbom", Version: "v0.1.0"})
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
	type row struct{ Ref, Type, Name, Version, Purl, Licenses, Hash string }
	var got []row
	for _, comp := range bom.Components {
		lic, _ := json.Marshal(comp.Licenses)
		got = append(got, row{comp.BOMRef, comp.Type, comp.Name, comp.Version, comp.Purl, string(lic), comp.Hashes[0].Content})
	}
	h := func(name string) string { s := narHash(name); return hex.EncodeToString(s[:]) }
	want := map[string]row{
		c.app:   {c.app, "application", "jq", "1.7.1", "pkg:nix/jq@1.7.1", `[{"expression":"MIT"}]`, h("jq")},
		c.glibc: {c.glibc, "library", "glibc", "2.40-66", "", "null", h("glibc")},
		c.tz:    {c.tz, "library", "tzdata", "2025b", "", "null", h("tz")},
		c.kit:   {c.kit, "application", "glovebox-kit", "0.1.0", "pkg:nix/glovebox-kit@0.1.0", `[{"license":{"name":"Unfree"}},{"license":{"name":"MIT","url":"https://spdx.org/licenses/MIT.html"}}]`, h("kit")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d components, want %d", len(got), len(want))
	}
	for i, r := range got {
		if i > 0 && got[i-1].Ref >= r.Ref {
			t.Errorf("components not sorted by store path: %s before %s", got[i-1].Ref, r.Ref)
		}
		if diff := cmp.Diff(want[r.Ref], r); diff != "" {
			t.Errorf("component %s (-want +got):\n%s", r.Ref, diff)
		}
	}

	deps := map[string][]string{}
	for _, d := range bom.Dependencies {
		deps[d.Ref] = d.DependsOn
	}
	wantDeps := map[string][]string{imageRef: sorted(c.kit, c.app), c.app: {c.glibc}, c.kit: {c.tz}, c.glibc: nil, c.tz: nil}
	if diff := cmp.Diff(wantDeps, deps); diff != "" {
		t.Errorf("dependencies (-want +got):\n%s", diff)
	}
	props := map[string]string{}
	for _, p := range bom.Metadata.Properties {
		props[p.Name] = p.Value
	}
	if props["glovebox:closure_sha256"] != prov.ClosureSHA256 || props["glovebox:input:nixpkgs:rev"] != prov.Inputs["nixpkgs"].Rev || props["glovebox:gbx"] != "v0.1.0" {
		t.Errorf("metadata properties = %v, want the provenance", props)
	}
	if m := bom.Metadata.Component; m == nil || m.Type != "container" || m.Name != "acme/box" || m.Version != "0.1.0" {
		t.Errorf("metadata.component = %+v, want the image", m)
	}
}

func sorted(s ...string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestBuildDeterministic: the order of the closure and the packages does
// not change the bytes; a change of content changes the serial number.
func TestBuildDeterministic(t *testing.T) {
	t.Parallel()
	c := newClosure()
	a, err := Build(c.paths, c.meta(), nil, Tool{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rev := newClosure()
	for i, j := 0, len(rev.paths)-1; i < j; i, j = i+1, j-1 {
		rev.paths[i], rev.paths[j] = rev.paths[j], rev.paths[i]
	}
	m := rev.meta()
	m.Roots = []string{rev.app, rev.kit, rev.app}
	b, err := Build(rev.paths, m, nil, Tool{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the same closure in another order gave other bytes:\n%s", cmp.Diff(string(a), string(b)))
	}
	c.paths[1].NarHash[0] ^= 1
	d, err := Build(c.paths, c.meta(), nil, Tool{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	serial := func(doc []byte) string {
		var v struct{ SerialNumber string }
		json.Unmarshal(doc, &v)
		return v.SerialNumber
	}
	if serial(a) == serial(d) || serial(a) == "" {
		t.Errorf("serial numbers %q and %q: want different ones for different closures", serial(a), serial(d))
	}
	if ClosureHash(c.paths) == ClosureHash(newClosure().paths) {
		t.Error("ClosureHash did not change with a NAR hash")
	}
}

func TestBuildRootOutsideClosure(t *testing.T) {
	t.Parallel()
	c := newClosure()
	m := c.meta()
	m.Roots = append(m.Roots, storePath("elsewhere"))
	if _, err := Build(c.paths, m, nil, Tool{Name: "t"}); err == nil || !strings.Contains(err.Error(), "is not in the closure") {
		t.Errorf("Build = %v, want a root outside the closure refused", err)
	}
}

func TestSplitStoreName(t *testing.T) {
	t.Parallel()
	for path, want := range map[string][2]string{
		storePath("glibc-2.40-66"):           {"glibc", "2.40-66"},
		storePath("python3-3.13.9-env"):      {"python3", "3.13.9-env"},
		storePath("fake-nss"):                {"fake-nss", ""},
		storePath("source"):                  {"source", ""},
		storePath("ffmpeg-headless-7.1-lib"): {"ffmpeg-headless", "7.1-lib"},
	} {
		if name, version := splitStoreName(path); [2]string{name, version} != want {
			t.Errorf("splitStoreName(%s) = %q, %q, want %q", path, name, version, want)
		}
	}
}

// TestRun runs the tool on a closureInfo-shaped directory and checks both
// files it writes: an SBOM that validates, and the manifest with every
// field kept in place and the provenance stamped.
func TestRun(t *testing.T) {
	t.Parallel()
	c := newClosure()
	dir := t.TempDir()
	info := filepath.Join(dir, "closure-info")
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("closure-info/registration", registration(c.paths, nix32Hash))
	var storePaths strings.Builder
	for _, p := range c.paths {
		storePaths.WriteString(p.Path + "\n")
	}
	write("closure-info/store-paths", storePaths.String())
	metaJSON, _ := json.Marshal(c.meta())
	meta := write("meta.json", string(metaJSON))
	manifest := write("glovebox.json", `{
  "name": "box",
  "version": "1.0.0",
  "key_fingerprint": "sha256:abc",
  "provenance": {"config_sha256": "`+strings.Repeat("c", 64)+`", "gbx": "v0.1.0"},
  "protocol_version": 1
}
`)
	out := filepath.Join(dir, "out")
	var stderr bytes.Buffer
	if err := Run([]string{"--closure", info, "--meta", meta, "--manifest", manifest, "--out", out}, &stderr, "v0.1.0"); err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(filepath.Join(out, SBOMFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := validateBOM(t, doc); err != nil {
		t.Fatalf("the SBOM is not CycloneDX 1.6: %v", err)
	}
	stamped, err := os.ReadFile(filepath.Join(out, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	wantManifest := `{
  "name": "box",
  "version": "1.0.0",
  "key_fingerprint": "sha256:abc",
  "provenance": {
    "config_sha256": "` + strings.Repeat("c", 64) + `",
    "gbx": "v0.1.0",
    "closure_sha256": "` + ClosureHash(c.paths) + `",
    "closure_paths": 4,
    "sbom": "/etc/glovebox/sbom.cdx.json",
    "sbom_sha256": "` + SHA256(doc) + `"
  },
  "protocol_version": 1
}
`
	if diff := cmp.Diff(wantManifest, string(stamped)); diff != "" {
		t.Errorf("stamped manifest (-want +got):\n%s", diff)
	}
	m, err := protocol.ParseManifest(stamped)
	if err != nil {
		t.Fatal(err)
	}
	if m.Provenance == nil || m.Provenance.ClosurePaths != 4 {
		t.Errorf("the kit reads provenance %+v", m.Provenance)
	}
	if !strings.Contains(string(doc), `"name": "glovebox:config_sha256"`) {
		t.Error("the SBOM does not record the config's digest")
	}

	for _, args := range [][]string{
		{"--closure", info, "--meta", meta, "--manifest", manifest},
		{"--closure", dir, "--meta", meta, "--manifest", manifest, "--out", out},
		{"--closure", info, "--meta", manifest + "x", "--manifest", manifest, "--out", out},
		{"--closure", info, "--meta", write("bad.json", "[1]"), "--manifest", manifest, "--out", out},
		{"--closure", info, "--meta", meta, "--manifest", write("list.json", "[]"), "--out", out},
	} {
		if err := Run(args, &stderr, "v0"); err == nil {
			t.Errorf("Run(%q) succeeded", args)
		}
	}
}

func TestStampManifestAppends(t *testing.T) {
	t.Parallel()
	got, err := StampManifest([]byte(`{"name":"x","fs":{}}`), Stamp{ClosureSHA256: "ab", ClosurePaths: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"name\": \"x\",\n  \"fs\": {},\n  \"provenance\": {\n    \"closure_sha256\": \"ab\",\n    \"closure_paths\": 2\n  }\n}\n"
	if string(got) != want {
		t.Errorf("StampManifest = %s, want %s", got, want)
	}
}
