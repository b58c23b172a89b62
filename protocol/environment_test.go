package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnvironmentProvenance: the manifest's provenance reaches the
// /environment body, which validates against the schema's environment
// with it, and reads back the same.
func TestEnvironmentProvenance(t *testing.T) {
	t.Parallel()
	m, err := ParseManifest([]byte(`{"name": "t", "version": "1", "provenance": {
  "config_sha256": "` + strings.Repeat("c", 64) + `", "gbx": "v1.2.3",
  "inputs": {"nixpkgs": {"url": "github:NixOS/nixpkgs/nixos-26.05", "rev": "` + strings.Repeat("a", 40) + `", "nar_hash": "sha256-x"}},
  "closure_sha256": "` + strings.Repeat("d", 64) + `", "closure_paths": 812,
  "sbom": "/etc/glovebox/sbom.cdx.json", "sbom_sha256": "` + strings.Repeat("e", 64) + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(m.Environment(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := loadSchema(t)
	if err := validate(s, s.def(t, "environment"), decodeNumbers(t, body)); err != nil {
		t.Errorf("/environment with provenance against $defs/environment: %v\n%s", err, body)
	}
	var back Environment
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m.Provenance, back.Provenance); diff != "" || back.Provenance == nil {
		t.Errorf("provenance through /environment (-manifest +environment):\n%s", diff)
	}
	bad := strings.Replace(string(body), `"closure_paths":812`, `"closure_paths":"812"`, 1)
	if validate(s, s.def(t, "environment"), decodeNumbers(t, []byte(bad))) == nil {
		t.Error("the schema accepted a closure_paths string")
	}
}
