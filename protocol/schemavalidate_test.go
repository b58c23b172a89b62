package protocol

import (
	"os"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/jsonschema"
)

// jschema is a node of the protocol's schema (2020-12), validated with
// internal/jsonschema. knownKeywords lists the keywords the schema may
// use: annotations, and keywords jsonschema.Keywords checks.
// TestSchemaKeywords fails on any other, so that the validator never
// silently ignores a constraint.
type jschema map[string]any

var knownKeywords = []string{
	"$schema", "$id", "$defs", "$ref", "title", "description",
	"type", "properties", "required", "additionalProperties", "items",
	"enum", "const", "oneOf", "minimum", "minLength",
}

func loadSchema(t testing.TB) jschema {
	t.Helper()
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatalf("read the protocol schema: %v", err)
	}
	v, err := jsonschema.Decode(data)
	if err != nil {
		t.Fatalf("%s is not JSON: %v", schemaPath, err)
	}
	s, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not a JSON object", schemaPath)
	}
	return s
}

func (s jschema) def(t testing.TB, name string) jschema {
	t.Helper()
	defs, _ := s["$defs"].(map[string]any)
	d, ok := defs[name].(map[string]any)
	if !ok {
		t.Fatalf("%s has no $defs/%s", schemaPath, name)
	}
	return d
}

// validate checks v (decoded with decodeNumbers) against sch, resolving
// $ref in root. It returns the first violation, with its JSON path.
func validate(root, sch jschema, v any) error {
	set := jsonschema.Set{schemaPath: map[string]any(root)}
	return set.Validate(schemaPath, sch, v)
}

func asStrings(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	v, err := jsonschema.Decode(data)
	if err != nil {
		t.Fatalf("%s is not JSON: %v", data, err)
	}
	return v
}
