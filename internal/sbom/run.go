package sbom

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Files glovebox-sbom writes into its output directory.
const (
	SBOMFile     = "sbom.cdx.json"
	ManifestFile = "glovebox.json"
)

// Run is glovebox-sbom: it reads a closureInfo directory, the evaluation's
// metadata and the box's manifest, and writes into --out the SBOM and the
// manifest stamped with the closure's provenance. version is the tool's
// own, recorded in the SBOM.
func Run(args []string, stderr io.Writer, version string) error {
	fl := flag.NewFlagSet("glovebox-sbom", flag.ContinueOnError)
	fl.SetOutput(stderr)
	closure := fl.String("closure", "", "a pkgs.closureInfo output `directory` (its registration file)")
	metaFile := fl.String("meta", "", "the evaluation's metadata `file` (nix/sbom.nix writes it)")
	manifestFile := fl.String("manifest", "", "the box's glovebox.json `file`")
	sbomPath := fl.String("sbom-path", "/etc/glovebox/"+SBOMFile, "where the image keeps the SBOM (recorded in the manifest)")
	out := fl.String("out", "", "the output `directory`: "+SBOMFile+" and "+ManifestFile+" are written there")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *closure == "" || *metaFile == "" || *manifestFile == "" || *out == "" || fl.NArg() > 0 {
		fl.Usage()
		return errors.New("glovebox-sbom: --closure, --meta, --manifest and --out are required, and nothing else")
	}

	reg, err := os.Open(filepath.Join(*closure, "registration"))
	if err != nil {
		return fmt.Errorf("closure: %w", err)
	}
	paths, err := ParseRegistration(reg)
	reg.Close()
	if err != nil {
		return fmt.Errorf("closure %s: %w", *closure, err)
	}
	data, err := os.ReadFile(*metaFile)
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	var meta Meta
	if err := json.Unmarshal(data, &meta); err != nil {
		return fmt.Errorf("meta %s: %w", *metaFile, err)
	}
	manifest, err := os.ReadFile(*manifestFile)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	prov, err := ManifestProvenance(manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", *manifestFile, err)
	}
	var closed protocol.Provenance
	if prov != nil {
		closed = *prov
	}
	closed.ClosureSHA256, closed.ClosurePaths = ClosureHash(paths), len(paths)
	doc, err := Build(paths, meta, &closed, Tool{Name: "glovebox-sbom", Version: version})
	if err != nil {
		return err
	}
	stamped, err := StampManifest(manifest, Stamp{
		ClosureSHA256: closed.ClosureSHA256, ClosurePaths: closed.ClosurePaths,
		SBOM: *sbomPath, SBOMSHA256: SHA256(doc),
	})
	if err != nil {
		return fmt.Errorf("%s: %w", *manifestFile, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, SBOMFile), doc, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, ManifestFile), stamped, 0o644)
}
