package generator

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// loadSchema reads a gzipped JSON schema from testdata/k8s.
func loadSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "k8s", name+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// validate checks v against the JSON Schema keywords the Kubernetes
// schemas use (type, enum, properties, additionalProperties, required,
// items, oneOf) and returns every violation with its path.
func validate(schema map[string]any, v any, path string) []string {
	var errs []string
	if t, ok := schema["type"]; ok && !typeOK(t, v) {
		return []string{fmt.Sprintf("%s: %s is not of type %v", path, jsonType(v), t)}
	}
	if enum, ok := schema["enum"].([]any); ok && v != nil && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", path, v, enum))
	}
	if one, ok := schema["oneOf"].([]any); ok {
		n := 0
		for _, s := range one {
			if len(validate(s.(map[string]any), v, path)) == 0 {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Sprintf("%s: matches %d of oneOf, want 1", path, n))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		required, _ := schema["required"].([]any)
		for _, r := range required {
			if _, ok := v[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: missing required %s", path, r))
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(ps, v[k], path+"."+k)...)
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, fmt.Sprintf("%s: unknown field %q", path, k))
				}
			case map[string]any:
				errs = append(errs, validate(ap, v[k], path+"."+k)...)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range v {
				errs = append(errs, validate(items, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}

func typeOK(t, v any) bool {
	types, ok := t.([]any)
	if !ok {
		types = []any{t}
	}
	for _, want := range types {
		got := jsonType(v)
		if want == got || (want == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// TestKubernetesSchemas validates every box's kubernetes.json against the
// published Kubernetes schemas (testdata/k8s), and checks what the box
// needs of it: the key from a Secret, /health probes, session affinity.
func TestKubernetesSchemas(t *testing.T) {
	t.Parallel()
	schemas := map[string]map[string]any{
		"Deployment": loadSchema(t, "deployment-apps-v1"),
		"Service":    loadSchema(t, "service-v1"),
	}
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			res := generateCase(t, filepath.Join("testdata", name), Options{})
			dec := json.NewDecoder(bytes.NewReader(fileData(t, res, KubernetesFile)))
			var list struct {
				APIVersion string           `json:"apiVersion"`
				Kind       string           `json:"kind"`
				Items      []map[string]any `json:"items"`
			}
			if err := dec.Decode(&list); err != nil {
				t.Fatal(err)
			}
			if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 2 {
				t.Fatalf("kubernetes.json is %s %s with %d items, want a v1 List of a Deployment and a Service", list.APIVersion, list.Kind, len(list.Items))
			}
			byKind := map[string]map[string]any{}
			for _, it := range list.Items {
				kind, _ := it["kind"].(string)
				schema, ok := schemas[kind]
				if !ok {
					t.Fatalf("item of kind %q", kind)
				}
				if errs := validate(schema, it, kind); len(errs) > 0 {
					t.Errorf("%s does not match the published schema:\n%s", kind, strings.Join(errs, "\n"))
				}
				byKind[kind] = it
			}
			d, _ := json.Marshal(byKind["Deployment"])
			for _, want := range []string{
				`"secretKeyRef":{"key":"GLOVEBOX_KEY"`,
				`"livenessProbe":{"failureThreshold":3,"httpGet":{"path":"/health/live","port":"http"}`,
				`"readinessProbe":{"failureThreshold":3,"httpGet":{"path":"/health","port":"http"}`,
				`"containerPort":8080`,
			} {
				if !strings.Contains(string(d), want) {
					t.Errorf("Deployment lacks %s:\n%s", want, d)
				}
			}
			s, _ := json.Marshal(byKind["Service"])
			if !strings.Contains(string(s), `"sessionAffinity":"ClientIP"`) {
				t.Errorf("Service has no ClientIP session affinity:\n%s", s)
			}
		})
	}
}

// TestKubernetesValidatorRejects shows the validator above is not a
// rubber stamp: a misspelt field, a wrong type and a missing required
// field all fail against the real schema.
func TestKubernetesValidatorRejects(t *testing.T) {
	t.Parallel()
	schema := loadSchema(t, "service-v1")
	for _, tc := range []struct {
		doc, want string
	}{
		{`{"apiVersion":"v1","kind":"Service","spec":{"sessionAfinity":"ClientIP"}}`, `unknown field "sessionAfinity"`},
		{`{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"port":"80"}]}}`, `Service.spec.ports[0].port: string is not of type`},
		{`{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"name":"http"}]}}`, `missing required port`},
		{`{"apiVersion":"v2","kind":"Service"}`, `v2 is not one of`},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.doc), &v); err != nil {
			t.Fatal(err)
		}
		errs := strings.Join(validate(schema, v, "Service"), "\n")
		if !strings.Contains(errs, tc.want) {
			t.Errorf("validate(%s) = %q, want %q", tc.doc, errs, tc.want)
		}
	}
}
