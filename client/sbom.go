package client

import (
	"context"
	"encoding/json"
)

// SBOM returns the box's CycloneDX SBOM (GET /sbom: the key, or a token
// with the environment or admin scope), as the box serves it. A box whose
// image was not built with Nix has none: the error then carries the box's
// HTTP 404 and its reason.
func (b *Box) SBOM(ctx context.Context) (json.RawMessage, error) {
	var doc json.RawMessage
	if err := b.getJSON(ctx, "sbom", true, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}
