package generator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestProvenance checks the manifest's provenance against the files it
// describes: the digest of the glovebox.toml on disk, the gbx release, and
// the inputs flake.lock pins.
func TestProvenance(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "minimal")
	toml, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(toml)
	release := Pin{Owner: "glovebox-dev", Repo: "glovebox", Ref: "v1.2.3", Rev: "0123456789abcdef0123456789abcdef01234567", NarHash: "sha256-" + strings.Repeat("C", 43) + "=", LastModified: 1}
	for _, tt := range []struct {
		name string
		opts Options
		gbx  string
		glo  *Pin
	}{
		{"development gbx", Options{KitVersion: "latest"}, "latest", nil},
		{"release gbx", Options{KitVersion: "v1.2.3", Glovebox: &release}, "v1.2.3", &release},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := generateCase(t, dir, tt.opts)
			var m protocol.Manifest
			if err := json.Unmarshal(fileData(t, res, ManifestFile), &m); err != nil {
				t.Fatal(err)
			}
			var lock struct {
				Nodes map[string]struct {
					Locked struct{ Rev, NarHash string }
				}
			}
			if err := json.Unmarshal(fileData(t, res, LockFile), &lock); err != nil {
				t.Fatal(err)
			}
			want := &protocol.Provenance{
				ConfigSHA256: hex.EncodeToString(sum[:]), Gbx: tt.gbx,
				Inputs: map[string]protocol.LockedInput{"nixpkgs": {
					URL: "github:NixOS/nixpkgs/" + DefaultBranch,
					Rev: lock.Nodes["nixpkgs"].Locked.Rev, NarHash: lock.Nodes["nixpkgs"].Locked.NarHash,
				}},
			}
			if tt.glo != nil {
				want.Inputs["glovebox"] = protocol.LockedInput{
					URL: "github:glovebox-dev/glovebox/v1.2.3",
					Rev: lock.Nodes["glovebox"].Locked.Rev, NarHash: lock.Nodes["glovebox"].Locked.NarHash,
				}
			}
			if diff := cmp.Diff(want, m.Provenance); diff != "" {
				t.Errorf("provenance (-want +got):\n%s", diff)
			}
			if want.Inputs["nixpkgs"].Rev == "" || (tt.glo != nil && want.Inputs["glovebox"].Rev != tt.glo.Rev) {
				t.Errorf("flake.lock does not pin what the provenance names: %+v", lock.Nodes)
			}
		})
	}
}
