package generator

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/glovebox-dev/glovebox/protocol"
)

// provenance is what gbx generate knows of where a box comes from, for
// its manifest: the config's digest, the gbx release that generates (its
// kit version, "latest" for a development build) and the inputs the lock
// pins. The image build adds its closure's hash (nix/sbom.nix), and
// /environment shows the result.
func provenance(c *Config, opts Options) *protocol.Provenance {
	inputs := map[string]protocol.LockedInput{"nixpkgs": lockedInput(opts.Nixpkgs)}
	if g := opts.Glovebox; g != nil {
		inputs["glovebox"] = lockedInput(*g)
	}
	return &protocol.Provenance{ConfigSHA256: c.SHA256, Gbx: opts.KitVersion, Inputs: inputs}
}

func lockedInput(p Pin) protocol.LockedInput {
	return protocol.LockedInput{URL: p.url(), Rev: p.Rev, NarHash: p.NarHash}
}

func configDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
