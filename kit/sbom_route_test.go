package kit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// withSBOM gives the box's manifest the provenance an image build
// stamps: the SBOM's path and sha256.
func withSBOM(path, digest string) boxOpt {
	return func(m *protocol.Manifest, _ *Options) {
		m.Provenance = &protocol.Provenance{ConfigSHA256: strings.Repeat("c", 64), ClosureSHA256: strings.Repeat("d", 64), ClosurePaths: 3, SBOM: path, SBOMSHA256: digest}
	}
}

func TestSBOMRoute(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": []}` + "\n")
	sum := sha256.Sum256(doc)
	digest := hex.EncodeToString(sum[:])
	file := filepath.Join(t.TempDir(), "sbom.cdx.json")
	if err := os.WriteFile(file, doc, 0o444); err != nil {
		t.Fatal(err)
	}
	b := newBox(t, scripted(nil), withSBOM(file, digest))

	for _, tt := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"key", b.auth(), http.StatusOK},
		{"environment token", bearer(b.token(protocol.ScopeEnvironment)), http.StatusOK},
		{"admin token", bearer(b.token(protocol.ScopeAdmin)), http.StatusOK},
		{"connect token", bearer(b.token(protocol.ScopeConnect)), http.StatusUnauthorized},
		{"no bearer", nil, http.StatusUnauthorized},
		{"wrong key", bearer(protocol.NewKey()), http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := b.get("/sbom", tt.header)
			if resp.StatusCode != tt.status {
				t.Fatalf("GET /sbom = %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			if tt.status != http.StatusOK {
				return
			}
			if string(body) != string(doc) {
				t.Errorf("body = %s, want the SBOM file", body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != SBOMContentType {
				t.Errorf("Content-Type = %q", ct)
			}
			if etag := resp.Header.Get("ETag"); etag != `"sha256:`+digest+`"` {
				t.Errorf("ETag = %q, want the SBOM's sha256", etag)
			}
		})
	}

	// /environment shows the provenance the SBOM route reads.
	resp, body := b.get("/environment", b.auth())
	var env protocol.Environment
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /environment = %d %s", resp.StatusCode, body)
	}
	if p := env.Provenance; p == nil || p.SBOMSHA256 != digest || p.ClosurePaths != 3 || p.ConfigSHA256 != strings.Repeat("c", 64) {
		t.Errorf("/environment provenance = %+v, want the manifest's", p)
	}

	req, _ := http.NewRequest(http.MethodPost, b.url+"/sbom", nil)
	req.Header.Set("Authorization", "Bearer "+b.key)
	post, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /sbom = %d, want 405", post.StatusCode)
	}
}

// TestSBOMRouteWithout: a box without an SBOM, or whose SBOM is missing or
// altered, says so instead of serving something else.
func TestSBOMRouteWithout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	altered := filepath.Join(dir, "altered.json")
	if err := os.WriteFile(altered, []byte(`{"bomFormat": "CycloneDX"}`), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		opts   []boxOpt
		status int
		want   string
	}{
		{"gbx dev", nil, http.StatusNotFound, "this box has no SBOM: only an image built with Nix"},
		{"missing file", []boxOpt{withSBOM(filepath.Join(dir, "nope.json"), "")}, http.StatusNotFound, "which the image lacks"},
		{"altered", []boxOpt{withSBOM(altered, strings.Repeat("0", 64))}, http.StatusInternalServerError, "does not match the manifest's sbom_sha256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newBox(t, scripted(nil), tt.opts...)
			resp, body := b.get("/sbom", b.auth())
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.want) {
				t.Errorf("GET /sbom = %d %q, want %d with %q", resp.StatusCode, body, tt.status, tt.want)
			}
		})
	}
}
