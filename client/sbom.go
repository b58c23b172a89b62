package client

import (
	"context"
	"encoding/json"
	"fmt"
)

// maxSBOM bounds the SBOM read, as the kit bounds the one it serves.
const maxSBOM = 64 << 20

// SBOM returns the box's CycloneDX SBOM (GET /sbom: the key, or a token
// with the environment or admin scope), as the box serves it. A box whose
// image was not built with Nix has none: the error then carries the box's
// HTTP 404 and its reason.
func (b *Box) SBOM(ctx context.Context) (json.RawMessage, error) {
	body, err := b.getBody(ctx, b.route("sbom"), "sbom", true, maxSBOM)
	if err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("box %q: sbom is not JSON", b.name)
	}
	return body, nil
}
