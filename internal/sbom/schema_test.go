package sbom

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/jsonschema"
)

// The CycloneDX 1.6 schema and the two files it references, against
// which every BOM is validated. TestSchemaKeywords fails when those files
// use a keyword the validator neither checks nor knows as an annotation,
// so no constraint is silently skipped.

const schemaDir = "testdata/cyclonedx"

// bomSchema is the file a BOM validates against.
const bomSchema = "bom-1.6.SNAPSHOT.schema.json"

// annotations change nothing a validator checks ("format" is an
// annotation in draft-07 unless a validator opts in).
var annotations = []string{
	"$schema", "$id", "$comment", "title", "description", "default", "examples", "definitions",
	"deprecated", "format", "meta:enum",
}

var loadSchemas = sync.OnceValues(func() (jsonschema.Set, error) {
	set := jsonschema.Set{}
	entries, err := os.ReadDir(schemaDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(schemaDir, e.Name()))
		if err != nil {
			return nil, err
		}
		v, err := jsonschema.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		set[e.Name()] = v
	}
	return set, nil
})

// validateBOM validates a JSON document against the CycloneDX 1.6 schema.
func validateBOM(t *testing.T, doc []byte) error {
	t.Helper()
	set, err := loadSchemas()
	if err != nil {
		t.Fatalf("load the CycloneDX schemas: %v", err)
	}
	v, err := jsonschema.Decode(doc)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return set.Validate(bomSchema, set[bomSchema].(map[string]any), v)
}

// TestSchemaKeywords fails when a schema file uses a keyword the
// validator neither checks nor knows as an annotation, and when a pattern
// does not compile as Go's regexp.
func TestSchemaKeywords(t *testing.T) {
	t.Parallel()
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	known := append(slices.Clone(jsonschema.Keywords), annotations...)
	var walk func(file, path string, s map[string]any)
	walk = func(file, path string, s map[string]any) {
		for _, k := range sortedKeys(s) {
			if !slices.Contains(known, k) {
				t.Errorf("%s %s: keyword %q is outside the validator's subset", file, path, k)
			}
			switch k {
			case "properties", "definitions":
				m, _ := s[k].(map[string]any)
				for _, name := range sortedKeys(m) {
					if sub, ok := m[name].(map[string]any); ok {
						walk(file, path+"/"+k+"/"+name, sub)
					}
				}
			case "items", "additionalProperties", "additionalItems", "if", "then":
				if sub, ok := s[k].(map[string]any); ok {
					walk(file, path+"/"+k, sub)
				}
				if subs, ok := s[k].([]any); ok {
					for i, x := range subs {
						walk(file, path+"/"+k+"/"+strconv.Itoa(i), x.(map[string]any))
					}
				}
			case "oneOf", "anyOf", "allOf":
				subs, _ := s[k].([]any)
				for i, x := range subs {
					walk(file, path+"/"+k+"/"+strconv.Itoa(i), x.(map[string]any))
				}
			case "pattern":
				if _, err := jsonschema.Compile(s[k].(string)); err != nil {
					t.Errorf("%s %s: %v", file, path, err)
				}
			}
		}
	}
	for _, file := range sortedKeys(set) {
		walk(file, "#", set[file].(map[string]any))
	}
}

// TestValidatorRejects holds the validator to the schema: documents that
// break it in different ways are refused.
func TestValidatorRejects(t *testing.T) {
	t.Parallel()
	good := `{"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1, "components": [
  {"type": "library", "name": "x", "hashes": [{"alg": "SHA-256", "content": "%s"}], "licenses": %s}]}`
	hex64 := strings.Repeat("ab", 32)
	tests := []struct{ name, doc, want string }{
		{"valid", fmt.Sprintf(good, hex64, `[{"expression": "MIT"}]`), ""},
		{"license by id", fmt.Sprintf(good, hex64, `[{"license": {"id": "MIT"}}]`), ""},
		{"unknown license id", fmt.Sprintf(good, hex64, `[{"license": {"id": "Not-A-License"}}]`), "oneOf"},
		{"two expressions", fmt.Sprintf(good, hex64, `[{"expression": "MIT"}, {"expression": "ISC"}]`), "oneOf"},
		{"bad hash", fmt.Sprintf(good, "xyz", `[]`), "does not match"},
		{"bad format", `{"bomFormat": "SPDX", "specVersion": "1.6"}`, "not one of"},
		{"missing specVersion", `{"bomFormat": "CycloneDX"}`, `missing required "specVersion"`},
		{"unknown field", `{"bomFormat": "CycloneDX", "specVersion": "1.6", "extra": 1}`, `unexpected field "extra"`},
		{"bad component type", `{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [{"type": "gizmo", "name": "x"}]}`, "not one of"},
		{"bad serial", `{"bomFormat": "CycloneDX", "specVersion": "1.6", "serialNumber": "urn:uuid:nope"}`, "does not match"},
		{"version below 1", `{"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 0}`, "below the minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateBOM(t, []byte(tt.doc))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validate = %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validate = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
