// Package sbom makes the CycloneDX 1.6 SBOM of a box image from its Nix
// closure, and the closure's part of the box's provenance.
//
// The image build (nix/sbom.nix) runs it through glovebox-sbom with two
// inputs: the closureInfo of the image's contents (every store path with
// its NAR hash, size and references, known only at build time), and a
// JSON file of what evaluation knows of the image's direct packages
// (pname, version, meta.license, meta.description, each output's store
// path). Every store path becomes a component; those evaluation described
// get their name, version, licenses and a pkg:nix purl, the others the
// name and version their store path spells. A component's hash is its
// store path's NAR hash (sha256 of the path serialised as a Nix archive,
// what `nix path-info` and binary caches give), not a hash of a file; its
// dependencies are the path's references. The output is deterministic:
// components sorted by store path, no timestamp, a serial number derived
// from the content.
//
// Why not sbomnix or bombon, which nixpkgs packages: sbomnix is Python and
// walks the derivation graph with nix commands at evaluation, which a
// sandboxed build step cannot run; bombon is Rust and needs its
// buildtime-dependencies walk at evaluation too. Either would put a
// Python or Rust toolchain into every box's build, for what is here a few
// hundred lines of Go built with the kit from the same source.
package sbom

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Meta is what evaluation knows of an image, as nix/sbom.nix writes it.
type Meta struct {
	// Name and Version are the image's (mkBox's name and tag).
	Name    string `json:"name"`
	Version string `json:"version"`
	// Roots are the store paths of the image's contents: the closure's
	// roots, which the image itself depends on.
	Roots []string `json:"roots"`
	// Packages are the derivations evaluation saw, the image's contents
	// and the Python packages of its Python environment.
	Packages []Package `json:"packages"`
}

// Package is one derivation's metadata, from its attributes and meta.
type Package struct {
	Pname       string           `json:"pname"`
	Version     string           `json:"version"`
	Description string           `json:"description,omitempty"`
	Homepage    string           `json:"homepage,omitempty"`
	Licenses    []PackageLicense `json:"licenses,omitempty"`
	// Outputs are the derivation's outputs' store paths by output name.
	Outputs map[string]string `json:"outputs"`
}

// PackageLicense is one of nixpkgs' lib.licenses (or a bare string license,
// given as FullName).
type PackageLicense struct {
	SpdxID   string `json:"spdxId,omitempty"`
	FullName string `json:"fullName,omitempty"`
	URL      string `json:"url,omitempty"`
}

// Tool names the program that made an SBOM.
type Tool struct{ Name, Version string }

// ClosureHash is the closure's Hash as Provenance.ClosureSHA256 defines
// it: sha256 over "<path> <hex NAR hash>\n" for each path, in byte order.
func ClosureHash(paths []StorePath) string {
	sorted := slices.Clone(paths)
	slices.SortFunc(sorted, func(a, b StorePath) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, p := range sorted {
		fmt.Fprintf(h, "%s %x\n", p.Path, p.NarHash)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Build makes the SBOM of a closure: a CycloneDX 1.6 JSON document,
// indented, ending in a newline. prov, when not nil, is the box's
// provenance, recorded in the document's metadata.
func Build(paths []StorePath, meta Meta, prov *protocol.Provenance, tool Tool) ([]byte, error) {
	known := map[string]bool{}
	for _, p := range paths {
		known[p.Path] = true
	}
	byPath := map[string]*Package{}
	output := map[string]string{}
	for i := range meta.Packages {
		pkg := &meta.Packages[i]
		for _, out := range sortedKeys(pkg.Outputs) {
			path := pkg.Outputs[out]
			if _, dup := byPath[path]; !dup {
				byPath[path], output[path] = pkg, out
			}
		}
	}
	for _, r := range meta.Roots {
		if !known[r] {
			return nil, fmt.Errorf("sbom: root %s is not in the closure", r)
		}
	}
	roots := slices.Clone(meta.Roots)
	slices.Sort(roots)
	roots = slices.Compact(roots)

	bom := Document{
		Schema:      "http://cyclonedx.org/schema/bom-1.6.schema.json",
		BOMFormat:   "CycloneDX",
		SpecVersion: "1.6",
		Version:     1,
		Metadata: Metadata{
			Tools: &Tools{Components: []Component{{Type: "application", Name: tool.Name, Version: tool.Version}}},
			Component: &Component{
				Type: "container", BOMRef: imageRef, Name: meta.Name, Version: meta.Version,
			},
			Properties: provenanceProperties(prov),
		},
		Components:   make([]Component, 0, len(paths)),
		Dependencies: []Dependency{{Ref: imageRef, DependsOn: roots}},
	}
	sorted := slices.Clone(paths)
	slices.SortFunc(sorted, func(a, b StorePath) int { return strings.Compare(a.Path, b.Path) })
	for _, p := range sorted {
		bom.Components = append(bom.Components, newComponent(p, byPath[p.Path], output[p.Path]))
		refs := slices.Clone(p.References)
		slices.Sort(refs)
		bom.Dependencies = append(bom.Dependencies, Dependency{Ref: p.Path, DependsOn: slices.Compact(refs)})
	}
	body, err := marshal(bom)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	bom.SerialNumber = uuid5(hex.EncodeToString(sum[:]))
	return marshal(bom)
}

// imageRef is the bom-ref of the image itself.
const imageRef = "image"

// newComponent is one store path's component; pkg is the derivation
// evaluation described it as, nil when it did not.
func newComponent(p StorePath, pkg *Package, output string) Component {
	c := Component{
		Type:   "library",
		BOMRef: p.Path,
		Hashes: []Hash{{Alg: "SHA-256", Content: hex.EncodeToString(p.NarHash[:])}},
		Properties: []Property{
			{Name: "nix:store_path", Value: p.Path},
			{Name: "nix:nar_size", Value: strconv.FormatInt(p.NarSize, 10)},
		},
	}
	if pkg == nil {
		c.Name, c.Version = splitStoreName(p.Path)
		return c
	}
	c.Type = "application"
	c.Name, c.Version = pkg.Pname, pkg.Version
	c.Description = pkg.Description
	c.Licenses = licenses(pkg.Licenses)
	if pkg.Pname != "" {
		c.Purl = purl(pkg.Pname, pkg.Version)
	}
	if pkg.Homepage != "" {
		c.ExternalReferences = []ExternalReference{{Type: "website", URL: pkg.Homepage}}
	}
	c.Properties = append(c.Properties, Property{Name: "nix:output", Value: output})
	if c.Name == "" {
		c.Name, c.Version = splitStoreName(p.Path)
	}
	return c
}

// splitStoreName splits a store path's name as Nix's parseDrvName does:
// the version starts at the first dash followed by a digit.
func splitStoreName(path string) (name, version string) {
	base := path[strings.LastIndexByte(path, '/')+1:]
	base = base[min(len(base), 33):] // the Hash and its dash
	for i := 0; i+1 < len(base); i++ {
		if base[i] == '-' && base[i+1] >= '0' && base[i+1] <= '9' {
			return base[:i], base[i+1:]
		}
	}
	return base, ""
}

// purl is a pkg:nix package URL (the type sbomnix and bombon use).
func purl(name, version string) string {
	u := "pkg:nix/" + purlEscape(name)
	if version != "" {
		u += "@" + purlEscape(version)
	}
	return u
}

// purlEscape percent-encodes what a purl's name or version may not hold
// as is.
func purlEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// licenses says a package's licenses: an SPDX expression when every one
// has an SPDX id (nixpkgs lists several licenses when parts of a package
// are under each, hence AND), else each by name.
func licenses(ls []PackageLicense) []LicenseChoice {
	if len(ls) == 0 {
		return nil
	}
	ids := make([]string, 0, len(ls))
	for _, l := range ls {
		if l.SpdxID == "" {
			ids = nil
			break
		}
		ids = append(ids, l.SpdxID)
	}
	if ids != nil {
		return []LicenseChoice{{Expression: strings.Join(ids, " AND ")}}
	}
	out := make([]LicenseChoice, 0, len(ls))
	for _, l := range ls {
		name := l.FullName
		if name == "" {
			name = l.SpdxID
		}
		out = append(out, LicenseChoice{License: &License{Name: name, URL: l.URL}})
	}
	return out
}

// provenanceProperties records a box's provenance in the SBOM's metadata.
func provenanceProperties(p *protocol.Provenance) []Property {
	if p == nil {
		return nil
	}
	var props []Property
	add := func(name, value string) {
		if value != "" {
			props = append(props, Property{Name: "glovebox:" + name, Value: value})
		}
	}
	add("config_sha256", p.ConfigSHA256)
	add("gbx", p.Gbx)
	for _, name := range sortedKeys(p.Inputs) {
		in := p.Inputs[name]
		add("input:"+name+":url", in.URL)
		add("input:"+name+":rev", in.Rev)
		add("input:"+name+":nar_hash", in.NarHash)
	}
	add("closure_sha256", p.ClosureSHA256)
	if p.ClosurePaths > 0 {
		add("closure_paths", strconv.Itoa(p.ClosurePaths))
	}
	return props
}

// uuid5 is the RFC 4122 name-based (SHA-1) UUID of name in the URL
// namespace, as a urn: the SBOM's serial number, the same for the same
// content.
func uuid5(name string) string {
	ns := [16]byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte("glovebox-sbom:" + name))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	x := hex.EncodeToString(u)
	return "urn:uuid:" + x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// marshal is indented JSON without HTML escaping, ending in a newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return b.Bytes(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
