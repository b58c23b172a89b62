package jsonschema

import (
	"strings"
	"testing"
)

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := Decode([]byte(s))
	if err != nil {
		t.Fatalf("Decode(%s) = %v", s, err)
	}
	return v
}

// TestValidate holds each keyword to a document it accepts and one it
// refuses, with the words of the refusal.
func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, schema, doc, want string }{
		{"type", `{"type": "string"}`, `"x"`, ""},
		{"type refused", `{"type": "string"}`, `1`, "number, want string"},
		{"integer", `{"type": "integer"}`, `2.0`, ""},
		{"integer refused", `{"type": "integer"}`, `2.5`, "want integer"},
		{"type list", `{"type": ["string", "null"]}`, `null`, ""},
		{"type list refused", `{"type": ["string", "null"]}`, `true`, "want one of"},
		{"const refused", `{"const": "a"}`, `"b"`, "want a"},
		{"enum refused", `{"enum": ["a", "b"]}`, `"c"`, "not one of the 2 allowed values"},
		{"minLength counts runes", `{"minLength": 2}`, `"é"`, "shorter than 2"},
		{"maxLength refused", `{"maxLength": 1}`, `"ab"`, "longer than 1"},
		{"minLength ignores non-strings", `{"minLength": 2}`, `7`, ""},
		{"pattern", `{"pattern": "^[a-f]+$"}`, `"cafe"`, ""},
		{"pattern refused", `{"pattern": "^[a-f]+$"}`, `"tea"`, "does not match"},
		{"bad pattern", `{"pattern": "("}`, `"x"`, "pattern"},
		{"minimum refused", `{"minimum": 1}`, `0`, "below the minimum 1"},
		{"maximum refused", `{"maximum": 1}`, `2`, "above the maximum 1"},
		{"required refused", `{"required": ["a"]}`, `{}`, `missing required "a"`},
		{"additionalProperties false", `{"properties": {"a": {}}, "additionalProperties": false}`, `{"a": 1, "b": 2}`, `unexpected field "b"`},
		{"additionalProperties schema", `{"additionalProperties": {"type": "string"}}`, `{"b": 2}`, "$.b: number"},
		{"property path", `{"properties": {"a": {"items": {"type": "string"}}}}`, `{"a": ["x", 1]}`, "$.a[1]: number"},
		{"minItems refused", `{"minItems": 1}`, `[]`, "want at least 1"},
		{"maxItems refused", `{"maxItems": 1}`, `[1, 2]`, "want at most 1"},
		{"uniqueItems refused", `{"uniqueItems": true}`, `[{"a": 1}, {"a": 1}]`, "items 0 and 1 are equal"},
		{"tuple", `{"items": [{"type": "string"}], "additionalItems": {"type": "number"}}`, `["x", 1, 2]`, ""},
		{"tuple refused", `{"items": [{"type": "string"}], "additionalItems": false}`, `["x", 1]`, "the tuple has 1"},
		{"allOf refused", `{"allOf": [{"type": "string"}, {"minLength": 3}]}`, `"ab"`, "fails allOf"},
		{"anyOf", `{"anyOf": [{"type": "string"}, {"type": "number"}]}`, `1`, ""},
		{"anyOf refused", `{"anyOf": [{"type": "string"}, {"type": "number"}]}`, `true`, "none of anyOf"},
		{"oneOf none", `{"oneOf": [{"type": "string"}, {"type": "number"}]}`, `true`, "none of oneOf"},
		{"oneOf two", `{"oneOf": [{"type": "number"}, {"minimum": 0}]}`, `1`, "2 alternatives of oneOf"},
		{"if then refused", `{"if": {"const": "a"}, "then": {"minLength": 2}}`, `"a"`, "shorter than 2"},
		{"if false skips then", `{"if": {"const": "a"}, "then": {"minLength": 2}}`, `"b"`, ""},
		{"local ref", `{"definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s"}`, `1`, "want string"},
		{"2020-12 ref", `{"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}`, `"x"`, ""},
		{"ref to a file", `{"$ref": "other.json"}`, `1`, "want boolean"},
		{"ref into a file", `{"$ref": "other.json#/definitions/n"}`, `"x"`, "want null"},
		{"ref to no file", `{"$ref": "none.json"}`, `1`, "no schema file none.json"},
		{"ref to nothing", `{"$ref": "#/definitions/none"}`, `1`, "no definitions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sch := mustDecode(t, tt.schema).(map[string]any)
			set := Set{
				"this.json":  sch,
				"other.json": mustDecode(t, `{"type": "boolean", "definitions": {"n": {"type": "null"}}}`),
			}
			err := set.Validate("this.json", sch, mustDecode(t, tt.doc))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate(%s, %s) = %v, want valid", tt.schema, tt.doc, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate(%s, %s) = %v, want an error with %q", tt.schema, tt.doc, err, tt.want)
			}
		})
	}
}

// TestDecodeNumbers checks that numbers come out as json.Number, which
// Validate needs to tell an integer from a number.
func TestDecodeNumbers(t *testing.T) {
	t.Parallel()
	if _, err := Decode([]byte(`{"a": `)); err == nil {
		t.Error("Decode(truncated JSON) = nil error, want one")
	}
	set := Set{}
	if err := set.Validate("", map[string]any{"type": "integer"}, mustDecode(t, `12345678901234567`)); err != nil {
		t.Errorf("Validate(integer, a 17-digit integer) = %v, want valid", err)
	}
}
