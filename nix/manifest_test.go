package nix_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/protocol"
)

// exampleKey is the documented key of the example boxes (packages.box-*).
// It is public: never deploy a box with it.
const exampleKey = "glovebox-example-key"

func TestExampleManifests(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"base", "media", "docs", "python", "browser"} {
		t.Run(base, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(nixtest.ModuleRoot(t), "baseimages", "manifests", base+".json"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := protocol.ParseManifest(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Check(); err != nil {
				t.Errorf("Check() = %v", err)
			}
			if m.Base != base || m.Name != "box-"+base {
				t.Errorf("name %q base %q, want box-%s, %s", m.Name, m.Base, base, base)
			}
			if want := protocol.Fingerprint(exampleKey); m.KeyFingerprint != want {
				t.Errorf("key_fingerprint = %s, want %s (Fingerprint(%q))", m.KeyFingerprint, want, exampleKey)
			}
		})
	}
}
