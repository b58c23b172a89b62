package sbom

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Stamp is what the image build adds to a box's provenance.
type Stamp struct {
	ClosureSHA256 string
	ClosurePaths  int
	// SBOM is the SBOM's path in the image and SBOMSHA256 its sha256.
	SBOM, SBOMSHA256 string
}

// ManifestProvenance returns the provenance a glovebox.json carries, nil
// when it has none.
func ManifestProvenance(manifest []byte) (*protocol.Provenance, error) {
	var m struct {
		Provenance *protocol.Provenance `json:"provenance"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return m.Provenance, nil
}

// StampManifest returns the manifest with the stamp merged into its
// provenance. Every other field stays as it was, in its place, so the
// kit reads the same manifest plus the closure's provenance.
func StampManifest(manifest []byte, s Stamp) ([]byte, error) {
	prov, err := ManifestProvenance(manifest)
	if err != nil {
		return nil, err
	}
	if prov == nil {
		prov = &protocol.Provenance{}
	}
	prov.ClosureSHA256, prov.ClosurePaths = s.ClosureSHA256, s.ClosurePaths
	prov.SBOM, prov.SBOMSHA256 = s.SBOM, s.SBOMSHA256
	pj, err := json.Marshal(prov)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}

	// Rewrite the top-level object key by key, replacing or appending
	// "provenance".
	dec := json.NewDecoder(bytes.NewReader(manifest))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("manifest: not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	replaced := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("manifest: %s: %w", key, err)
		}
		if key == "provenance" {
			v, replaced = pj, true
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	if !replaced {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.WriteString(`"provenance":`)
		out.Write(pj)
	}
	out.WriteByte('}')
	var b bytes.Buffer
	if err := json.Indent(&b, out.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// SHA256 is the hex sha256 of data.
func SHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
