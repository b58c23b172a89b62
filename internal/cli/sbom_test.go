package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/sbom"
	"github.com/glovebox-dev/glovebox/protocol"
)

// testSBOM is an SBOM as glovebox-sbom writes one, of a two-path closure.
func testSBOM(t *testing.T) []byte {
	t.Helper()
	app := "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-jq-1.7.1-bin"
	lib := "/nix/store/abcdfghijklmnpqrsvwxyz0123456789-oniguruma-6.9.10-lib"
	doc, err := sbom.Build(
		[]sbom.StorePath{{Path: app, NarSize: 10, References: []string{lib}}, {Path: lib, NarSize: 20}},
		sbom.Meta{Name: "acme/box", Version: "1.0.0", Roots: []string{app}, Packages: []sbom.Package{{
			Pname: "jq", Version: "1.7.1", Licenses: []sbom.PackageLicense{{SpdxID: "MIT"}}, Outputs: map[string]string{"bin": app},
		}}},
		&protocol.Provenance{ClosureSHA256: strings.Repeat("e", 64)}, sbom.Tool{Name: "glovebox-sbom", Version: "v0"})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

const wantTable = `acme/box 1.0.0: 2 store paths
closure sha256 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee
NAME       VERSION     LICENSE
jq         1.7.1       MIT
oniguruma  6.9.10-lib  -
`

// TestSBOMFromBox asks a running box over HTTP, with the key and with a
// token, and a box without an SBOM.
func TestSBOMFromBox(t *testing.T) {
	t.Parallel()
	doc := testSBOM(t)
	file := filepath.Join(t.TempDir(), "sbom.cdx.json")
	if err := os.WriteFile(file, doc, 0o444); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	prov, _ := json.Marshal(protocol.Provenance{
		ConfigSHA256: strings.Repeat("c", 64), Gbx: "v1.2.3",
		Inputs:        map[string]protocol.LockedInput{"nixpkgs": {Rev: strings.Repeat("a", 40), NarHash: "sha256-x"}},
		ClosureSHA256: strings.Repeat("e", 64), ClosurePaths: 2,
		SBOM: file, SBOMSHA256: hex.EncodeToString(sum[:]),
	})
	url, key := testBox(t, `{"name":"t","provenance":`+string(prov)+`}`)

	stdout, stderr, err := runGbx(t, boxEnv(url, key), t.TempDir(), "sbom")
	if err != nil || stdout != string(doc) {
		t.Errorf("gbx sbom = %q, %v (%s), want the SBOM", stdout, err, stderr)
	}
	token := mintFor(t, key, protocol.ScopeEnvironment)
	stdout, _, err = runGbx(t, boxEnv(url, token), t.TempDir(), "sbom", "--format", "table")
	if err != nil || stdout != wantTable {
		t.Errorf("gbx sbom --format table with an environment token = %q, %v, want\n%s", stdout, err, wantTable)
	}

	// gbx env shows the provenance the box's manifest carries.
	stdout, _, err = runGbx(t, boxEnv(url, key), t.TempDir(), "env")
	for _, row := range []string{
		"  config        " + strings.Repeat("c", 64) + "\n",
		"  gbx           v1.2.3\n",
		"  nixpkgs       " + strings.Repeat("a", 40) + "\n",
		"  closure       " + strings.Repeat("e", 64) + " (2 store paths)\n",
	} {
		if err != nil || !strings.Contains(stdout, row) {
			t.Errorf("gbx env = %q, %v, want the row %q", stdout, err, row)
		}
	}

	bare, bareKey := testBox(t, `{"name":"t"}`)
	_, _, err = runGbx(t, boxEnv(bare, bareKey), t.TempDir(), "sbom")
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "this box has no SBOM") {
		t.Errorf("gbx sbom on a box without one = %v, want the box's 404 and reason", err)
	}
	if _, _, err := runGbx(t, boxEnv(url, key), t.TempDir(), "sbom", "--format", "xml"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "want json or table") {
		t.Errorf("gbx sbom --format xml = %v, want a usage error", err)
	}
}

// tarOf is a tar of the named files, in order.
func tarOf(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f[1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipped(data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

// TestSBOMFromImage reads the SBOM out of what a build leaves: the
// script that streams the image (run, not loaded anywhere), docker save's
// tarball, an OCI archive with gzip layers, and the SBOM's own build.
func TestSBOMFromImage(t *testing.T) {
	t.Parallel()
	doc := testSBOM(t)
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A streamLayeredImage tarball: store-path layers, then the
	// customisation layer with /etc/glovebox; an older SBOM in an earlier
	// layer is overridden.
	docker := tarOf(t,
		[2]string{"aaaa/layer.tar", string(tarOf(t, [2]string{"nix/store/x-jq/bin/jq", "ELF"}, [2]string{"etc/glovebox/sbom.cdx.json", "{}"}))},
		[2]string{"bbbb/layer.tar", string(tarOf(t, [2]string{"./etc/glovebox/glovebox.json", "{}"}, [2]string{"./etc/glovebox/sbom.cdx.json", string(doc)}))},
		[2]string{"config.json", `{"architecture": "amd64"}`},
		[2]string{"manifest.json", `[{"Layers": ["aaaa/layer.tar", "bbbb/layer.tar"]}]`},
	)
	tarball := write("image.tar", docker, 0o644)
	oci := write("oci.tar", tarOf(t,
		[2]string{"oci-layout", `{"imageLayoutVersion": "1.0.0"}`},
		[2]string{"blobs/sha256/1111", string(gzipped(tarOf(t, [2]string{"etc/glovebox/sbom.cdx.json", string(doc)})))},
		[2]string{"index.json", `{}`},
	), 0o644)
	script := write("result", []byte("#!/bin/sh\nexec cat '"+tarball+"'\n"), 0o755)
	failing := write("broken", []byte("#!/bin/sh\necho no python here >&2\nexit 3\n"), 0o755)
	build := filepath.Dir(write("sbom-build/sbom.cdx.json", doc, 0o644))
	sbomFile := write("plain.cdx.json", doc, 0o644)

	for _, p := range []string{script, tarball, oci, build, sbomFile} {
		stdout, stderr, err := runGbx(t, nil, dir, "sbom", p)
		if err != nil || stdout != string(doc) {
			t.Errorf("gbx sbom %s = %.80q, %v (%s), want the SBOM", filepath.Base(p), stdout, err, stderr)
		}
	}
	stdout, _, err := runGbx(t, nil, dir, "sbom", "--format", "table", "result")
	if err != nil || stdout != wantTable {
		t.Errorf("gbx sbom --format table result = %q, %v, want\n%s", stdout, err, wantTable)
	}

	noSBOM := write("plain.tar", tarOf(t, [2]string{"x/layer.tar", string(tarOf(t, [2]string{"etc/passwd", "root"}))}), 0o644)
	for _, tt := range []struct{ path, want string }{
		{noSBOM, "has no /etc/glovebox/sbom.cdx.json"},
		{write("notes.txt", []byte("hello, this is not an image at all, not even close to a tar header"), 0o644), "is not an image"},
		{dir, "holds no sbom.cdx.json"},
		{failing, "exit status 3: no python here"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		if _, _, err := runGbx(t, nil, dir, "sbom", tt.path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gbx sbom %s = %v, want an error with %q", filepath.Base(tt.path), err, tt.want)
		}
	}
	if _, _, err := runGbx(t, nil, dir, "sbom", tarball, "--url", "http://127.0.0.1:1"); !errors.Is(err, ErrUsage) {
		t.Errorf("gbx sbom IMAGE --url = %v, want a usage error", err)
	}
}
