// Command glovebox-sbom makes a box image's CycloneDX SBOM from its Nix
// closure at build time, and stamps the box's manifest with the closure's
// provenance. nix/sbom.nix runs it; see internal/sbom.
package main

import (
	"fmt"
	"os"

	"github.com/glovebox-dev/glovebox/internal/sbom"
)

// Version is stamped by the Nix build with -ldflags -X.
var Version = "dev"

func main() {
	if err := sbom.Run(os.Args[1:], os.Stderr, Version); err != nil {
		fmt.Fprintln(os.Stderr, "glovebox-sbom:", err)
		os.Exit(1)
	}
}
