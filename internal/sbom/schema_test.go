package sbom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A JSON Schema (draft-07) validator for the subset of keywords the
// CycloneDX 1.6 schema and the two it references use. TestSchemaKeywords
// fails when those files use a keyword outside validating or annotations,
// so no constraint is silently skipped.

const schemaDir = "testdata/cyclonedx"

// bomSchema is the file a BOM validates against.
const bomSchema = "bom-1.6.SNAPSHOT.schema.json"

var (
	validating = []string{
		"$ref", "type", "properties", "required", "additionalProperties", "items", "additionalItems",
		"enum", "const", "pattern", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength",
		"minimum", "maximum", "oneOf", "anyOf", "allOf", "if", "then",
	}
	// annotations change nothing a validator checks ("format" is an
	// annotation in draft-07 unless a validator opts in).
	annotations = []string{
		"$schema", "$id", "$comment", "title", "description", "default", "examples", "definitions",
		"deprecated", "format", "meta:enum",
	}
)

// schemaSet is the three schema files, by file name.
type schemaSet map[string]any

var loadSchemas = sync.OnceValues(func() (schemaSet, error) {
	set := schemaSet{}
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
		v, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		set[e.Name()] = v
	}
	return set, nil
})

func decode(data []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// validateBOM validates a JSON document against the CycloneDX 1.6 schema.
func validateBOM(t *testing.T, doc []byte) error {
	t.Helper()
	set, err := loadSchemas()
	if err != nil {
		t.Fatalf("load the CycloneDX schemas: %v", err)
	}
	v, err := decode(doc)
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return set.validate(bomSchema, set[bomSchema].(map[string]any), v, "$")
}

// resolve finds a $ref: "#/definitions/x" in file, "other.json", or
// "other.json#/definitions/x".
func (set schemaSet) resolve(file, ref string) (string, map[string]any, error) {
	target, pointer, _ := strings.Cut(ref, "#")
	if target != "" {
		file = target
	}
	node, ok := set[file]
	if !ok {
		return "", nil, fmt.Errorf("$ref %q: no schema file %s", ref, file)
	}
	for _, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if part == "" {
			continue
		}
		m, ok := node.(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("$ref %q: %s is not an object", ref, part)
		}
		if node, ok = m[part]; !ok {
			return "", nil, fmt.Errorf("$ref %q: no %s", ref, part)
		}
	}
	m, ok := node.(map[string]any)
	if !ok {
		return "", nil, fmt.Errorf("$ref %q is not a schema", ref)
	}
	return file, m, nil
}

var patterns sync.Map // string -> *regexp.Regexp

func (set schemaSet) validate(file string, sch map[string]any, v any, path string) error {
	if ref, ok := sch["$ref"].(string); ok {
		f, target, err := set.resolve(file, ref)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := set.validate(f, target, v, path); err != nil {
			return err
		}
	}
	if err := checkScalar(sch, v, path); err != nil {
		return err
	}
	if obj, ok := v.(map[string]any); ok {
		if err := set.validateObject(file, sch, obj, path); err != nil {
			return err
		}
	}
	if arr, ok := v.([]any); ok {
		if err := set.validateArray(file, sch, arr, path); err != nil {
			return err
		}
	}
	return set.validateCombinators(file, sch, v, path)
}

func checkScalar(sch map[string]any, v any, path string) error {
	if c, ok := sch["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%s: %v, want %v", path, v, c)
	}
	if e, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) }) {
		return fmt.Errorf("%s: %v is not one of the %d allowed values", path, v, len(e))
	}
	switch typ := sch["type"].(type) {
	case string:
		if !hasType(v, typ) {
			return fmt.Errorf("%s: %s, want %s", path, typeName(v), typ)
		}
	case []any:
		if !slices.ContainsFunc(typ, func(x any) bool { s, _ := x.(string); return hasType(v, s) }) {
			return fmt.Errorf("%s: %s, want one of %v", path, typeName(v), typ)
		}
	}
	if s, ok := v.(string); ok {
		n := int64(len([]rune(s)))
		if m, ok := number(sch["minLength"]); ok && float64(n) < m {
			return fmt.Errorf("%s: %q is shorter than %v", path, s, m)
		}
		if m, ok := number(sch["maxLength"]); ok && float64(n) > m {
			return fmt.Errorf("%s: %q is longer than %v", path, s, m)
		}
		if p, ok := sch["pattern"].(string); ok {
			re, err := compile(p)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if !re.MatchString(s) {
				return fmt.Errorf("%s: %q does not match %s", path, s, p)
			}
		}
	}
	if f, ok := number(v); ok {
		if m, ok := number(sch["minimum"]); ok && f < m {
			return fmt.Errorf("%s: %v is below the minimum %v", path, f, m)
		}
		if m, ok := number(sch["maximum"]); ok && f > m {
			return fmt.Errorf("%s: %v is above the maximum %v", path, f, m)
		}
	}
	return nil
}

func compile(p string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", p, err)
	}
	patterns.Store(p, re)
	return re, nil
}

func (set schemaSet) validateObject(file string, sch, obj map[string]any, path string) error {
	props, _ := sch["properties"].(map[string]any)
	for _, r := range asStrings(sch["required"]) {
		if _, ok := obj[r]; !ok {
			return fmt.Errorf("%s: missing required %q", path, r)
		}
	}
	for _, k := range sortedKeys(obj) {
		if p, ok := props[k].(map[string]any); ok {
			if err := set.validate(file, p, obj[k], path+"."+k); err != nil {
				return err
			}
			continue
		}
		switch ap := sch["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fmt.Errorf("%s: unexpected field %q", path, k)
			}
		case map[string]any:
			if err := set.validate(file, ap, obj[k], path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (set schemaSet) validateArray(file string, sch map[string]any, arr []any, path string) error {
	if m, ok := number(sch["minItems"]); ok && float64(len(arr)) < m {
		return fmt.Errorf("%s: %d items, want at least %v", path, len(arr), m)
	}
	if m, ok := number(sch["maxItems"]); ok && float64(len(arr)) > m {
		return fmt.Errorf("%s: %d items, want at most %v", path, len(arr), m)
	}
	if u, _ := sch["uniqueItems"].(bool); u {
		for i := range arr {
			for j := range i {
				if jsonEqual(arr[i], arr[j]) {
					return fmt.Errorf("%s: items %d and %d are equal", path, j, i)
				}
			}
		}
	}
	switch items := sch["items"].(type) {
	case map[string]any:
		for i, x := range arr {
			if err := set.validate(file, items, x, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case []any: // a tuple
		for i, x := range arr {
			if i < len(items) {
				if err := set.validate(file, items[i].(map[string]any), x, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
				continue
			}
			switch ai := sch["additionalItems"].(type) {
			case bool:
				if !ai {
					return fmt.Errorf("%s: %d items, the tuple has %d", path, len(arr), len(items))
				}
			case map[string]any:
				if err := set.validate(file, ai, x, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (set schemaSet) validateCombinators(file string, sch map[string]any, v any, path string) error {
	count := func(key string) (int, []string) {
		alts, _ := sch[key].([]any)
		n, errs := 0, []string(nil)
		for _, a := range alts {
			if err := set.validate(file, a.(map[string]any), v, path); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			n++
		}
		return n, errs
	}
	if alts, ok := sch["allOf"].([]any); ok {
		if n, errs := count("allOf"); n != len(alts) {
			return fmt.Errorf("%s: fails allOf:\n\t%s", path, strings.Join(errs, "\n\t"))
		}
	}
	if _, ok := sch["anyOf"]; ok {
		if n, errs := count("anyOf"); n == 0 {
			return fmt.Errorf("%s: matches none of anyOf:\n\t%s", path, strings.Join(errs, "\n\t"))
		}
	}
	if _, ok := sch["oneOf"]; ok {
		switch n, errs := count("oneOf"); n {
		case 1:
		case 0:
			return fmt.Errorf("%s: matches none of oneOf:\n\t%s", path, strings.Join(errs, "\n\t"))
		default:
			return fmt.Errorf("%s: matches %d alternatives of oneOf, want one", path, n)
		}
	}
	if cond, ok := sch["if"].(map[string]any); ok && set.validate(file, cond, v, path) == nil {
		if then, ok := sch["then"].(map[string]any); ok {
			if err := set.validate(file, then, v, path); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		f, ok := number(v)
		return ok && f == math.Trunc(f)
	}
	return false
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
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

// TestSchemaKeywords fails when a schema file uses a keyword the
// validator neither checks nor knows as an annotation, and when a pattern
// does not compile as Go's regexp.
func TestSchemaKeywords(t *testing.T) {
	t.Parallel()
	set, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	known := append(slices.Clone(validating), annotations...)
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
				if _, err := compile(s[k].(string)); err != nil {
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
