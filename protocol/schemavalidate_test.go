package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// jschema is the subset of JSON Schema (2020-12) the protocol's schema
// uses. knownKeywords lists it; TestSchemaKeywords fails on any other, so
// that the validator never silently ignores a constraint.
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
	var s jschema
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s is not JSON: %v", schemaPath, err)
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

// validate checks v (decoded with UseNumber) against sch, resolving $ref in
// root. It returns the first violation, with its JSON path.
func validate(root, sch jschema, v any, path string) error {
	if ref, ok := sch["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		if !found {
			return fmt.Errorf("%s: unsupported $ref %q", path, ref)
		}
		defs, _ := root["$defs"].(map[string]any)
		d, ok := defs[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: $ref %q names no definition", path, ref)
		}
		if err := validate(root, d, v, path); err != nil {
			return err
		}
	}
	if c, ok := sch["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%s: %v, want %v", path, v, c)
	}
	if e, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) }) {
		return fmt.Errorf("%s: %v is not one of %v", path, v, e)
	}
	if typ, ok := sch["type"].(string); ok && !hasType(v, typ) {
		return fmt.Errorf("%s: %s, want %s", path, jsonTypeName(v), typ)
	}
	if m, ok := sch["minimum"].(json.Number); ok {
		n, _ := v.(json.Number)
		min, _ := m.Float64()
		if f, err := n.Float64(); err == nil && f < min {
			return fmt.Errorf("%s: %v is below the minimum %v", path, v, m)
		}
	}
	if m, ok := sch["minLength"].(json.Number); ok {
		s, _ := v.(string)
		min, _ := m.Int64()
		if int64(len([]rune(s))) < min {
			return fmt.Errorf("%s: %q is shorter than %d", path, s, min)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := sch["properties"].(map[string]any)
		for _, r := range asStrings(sch["required"]) {
			if _, ok := obj[r]; !ok {
				return fmt.Errorf("%s: missing required %q", path, r)
			}
		}
		for _, k := range sortedKeys(obj) {
			if p, ok := props[k].(map[string]any); ok {
				if err := validate(root, p, obj[k], path+"."+k); err != nil {
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
				if err := validate(root, ap, obj[k], path+"."+k); err != nil {
					return err
				}
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := sch["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := validate(root, items, x, path+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
	}
	if alts, ok := sch["oneOf"].([]any); ok {
		var matched []int
		var errs []string
		for i, a := range alts {
			if err := validate(root, a.(map[string]any), v, path); err != nil {
				errs = append(errs, err.Error())
				continue
			}
			matched = append(matched, i)
		}
		switch {
		case len(matched) == 0:
			return fmt.Errorf("%s: matches none of %d alternatives:\n\t%s", path, len(alts), strings.Join(errs, "\n\t"))
		case len(matched) > 1:
			return fmt.Errorf("%s: matches alternatives %v, want exactly one", path, matched)
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
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f)
	}
	return false
}

func jsonTypeName(v any) string {
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

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s is not JSON: %v", data, err)
	}
	return v
}

// TestSchemaKeywords fails when the schema uses a keyword the validator
// does not implement.
