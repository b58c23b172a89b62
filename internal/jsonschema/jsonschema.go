// Package jsonschema validates JSON documents against a JSON Schema in
// tests. It implements the subset of draft-07 and 2020-12 that the
// project's schemas use (the protocol's, and CycloneDX 1.6 with the two
// files it references), listed in Keywords. A test that validates against
// a schema also fails when that schema uses a keyword outside the subset,
// so that no constraint is ever silently skipped.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Keywords are the keywords Validate checks. Any other keyword in a
// schema is ignored by Validate, so it must be an annotation.
var Keywords = []string{
	"$ref", "type", "properties", "required", "additionalProperties", "items", "additionalItems",
	"enum", "const", "pattern", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength",
	"minimum", "maximum", "oneOf", "anyOf", "allOf", "if", "then",
}

// Set is a group of schema documents, by file name, between which $ref
// resolves.
type Set map[string]any

// Decode reads a JSON document with its numbers as json.Number, the form
// Validate takes both schemas and documents in.
func Decode(data []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Validate checks v against schema, a node of the document file in the
// set. It returns the first violation, with its JSON path from "$".
func (set Set) Validate(file string, schema map[string]any, v any) error {
	return set.validate(file, schema, v, "$")
}

// resolve finds a $ref: "#/definitions/x" in file, "other.json", or
// "other.json#/definitions/x".
func (set Set) resolve(file, ref string) (string, map[string]any, error) {
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

func (set Set) validate(file string, sch map[string]any, v any, path string) error {
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
			re, err := Compile(p)
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

var patterns sync.Map // string -> *regexp.Regexp

// Compile compiles a schema's pattern as Validate does, once per pattern.
// A schema's own test calls it to find a pattern Go's regexp refuses
// before a document happens to reach it.
func Compile(p string) (*regexp.Regexp, error) {
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

func (set Set) validateObject(file string, sch, obj map[string]any, path string) error {
	props, _ := sch["properties"].(map[string]any)
	required, _ := sch["required"].([]any)
	for _, r := range required {
		if s, ok := r.(string); ok {
			if _, ok := obj[s]; !ok {
				return fmt.Errorf("%s: missing required %q", path, s)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
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

func (set Set) validateArray(file string, sch map[string]any, arr []any, path string) error {
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

func (set Set) validateCombinators(file string, sch map[string]any, v any, path string) error {
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
