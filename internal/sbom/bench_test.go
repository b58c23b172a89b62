package sbom

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkBuild makes the SBOM of a closure the size of a large image's
// (3000 store paths, each with five references, 200 of them described).
func BenchmarkBuild(b *testing.B) {
	const n = 3000
	paths := make([]StorePath, n)
	meta := Meta{Name: "acme/box", Version: "1"}
	for i := range paths {
		paths[i] = StorePath{Path: storePath(fmt.Sprintf("pkg%d-1.%d", i, i)), NarHash: narHash(fmt.Sprint(i)), NarSize: int64(i)}
	}
	for i := range paths {
		for j := 1; j <= 5; j++ {
			paths[i].References = append(paths[i].References, paths[(i+j*7)%n].Path)
		}
		if i%15 == 0 {
			meta.Roots = append(meta.Roots, paths[i].Path)
			meta.Packages = append(meta.Packages, Package{Pname: fmt.Sprint("pkg", i), Version: "1", Licenses: []PackageLicense{{SpdxID: "MIT"}}, Outputs: map[string]string{"out": paths[i].Path}})
		}
	}
	reg := registration(paths, nix32Hash)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		parsed, err := ParseRegistration(strings.NewReader(reg))
		if err != nil {
			b.Fatal(err)
		}
		doc, err := Build(parsed, meta, nil, Tool{Name: "glovebox-sbom"})
		if err != nil {
			b.Fatal(err)
		}
		size = len(doc)
	}
	b.ReportMetric(float64(size), "bytes/sbom")
}
