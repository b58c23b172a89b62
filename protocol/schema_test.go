package protocol

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The wire protocol is described once, in schema/glovebox-v1.schema.json.
// These tests hold the Go side to it: the golden frames validate, every
// message type's Go struct has exactly the schema's fields (a field without
// omitempty is a required one), and the schema's enums list exactly the
// constants this package declares. The TypeScript client generates its wire
// types from the same file (client/typescript/scripts/gen-wire.mjs).

const schemaPath = "schema/glovebox-v1.schema.json"

func TestSchemaKeywords(t *testing.T) {
	t.Parallel()
	var walk func(path string, v any, inProps bool)
	walk = func(path string, v any, inProps bool) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				if !inProps && !slices.Contains(knownKeywords, k) {
					t.Errorf("%s: keyword %q is outside the subset the tests validate (%s)", path, k, strings.Join(knownKeywords, ", "))
				}
				// Under properties and $defs the keys are names, not keywords.
				walk(path+"/"+k, v[k], !inProps && (k == "properties" || k == "$defs"))
			}
		case []any:
			for i, x := range v {
				walk(path+"/"+strconv.Itoa(i), x, false)
			}
		}
	}
	walkSchema(t, loadSchema(t), walk)
}

// walkSchema walks s, skipping enum and const values (data, not schemas).
func walkSchema(t *testing.T, s jschema, walk func(string, any, bool)) {
	t.Helper()
	var strip func(v any) any
	strip = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				if k == "enum" || k == "const" || k == "description" || k == "title" {
					out[k] = nil
					continue
				}
				out[k] = strip(x)
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = strip(x)
			}
			return out
		}
		return v
	}
	walk("#", strip(map[string]any(s)), false)
}

// TestSchemaGolden validates every golden frame, and the frame Encode
// writes after decoding it, against the schema.
func TestSchemaGolden(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	files, err := filepath.Glob("testdata/golden/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden frames in testdata/golden (%v)", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var def string
			var m any
			switch {
			case strings.HasPrefix(name, "client_"):
				def = "client_message"
				m, err = DecodeClient(data)
			case strings.HasPrefix(name, "server_"):
				def = "server_message"
				m, err = DecodeServer(data)
			default:
				t.Fatalf("golden %s: want a client_ or server_ prefix", name)
			}
			if err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			if err := validate(s, s.def(t, def), decodeNumbers(t, data)); err != nil {
				t.Errorf("golden %s against $defs/%s: %v", name, def, err)
			}
			enc, err := Encode(m)
			if err != nil {
				t.Fatalf("Encode(%T) = %v", m, err)
			}
			if err := validate(s, s.def(t, def), decodeNumbers(t, enc)); err != nil {
				t.Errorf("Encode(decoded %s) = %s, against $defs/%s: %v", name, enc, def, err)
			}
		})
	}
}

// TestSchemaRejects shows the validator is not vacuous: frames that break
// the schema fail.
func TestSchemaRejects(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	tests := []struct {
		def, frame string
	}{
		{"client_message", `{"type":"prompt","text":"no id"}`},
		{"client_message", `{"type":"prompt","id":"","text":"empty id"}`},
		{"client_message", `{"type":"prompt","id":"a","text":"x","inputs":{"f":{"kind":"inline","name":"f"}}}`},
		{"client_message", `{"type":"prompt","id":"a","text":"x","inputs":{"f":{"kind":"ftp","name":"f"}}}`},
		{"client_message", `{"type":"abort","id":7}`},
		{"client_message", `{"type":"ping"}`},
		{"client_message", `{"type":"shout","id":"a"}`},
		{"server_message", `{"type":"event","id":"a","event_type":"text_delta","data":{},"seq":0}`},
		{"server_message", `{"type":"event","id":"a","event_type":"text_delta","data":{},"seq":1.5}`},
		{"server_message", `{"type":"complete","id":"a","message":"m"}`},
		{"server_message", `{"type":"complete","id":"a","message":"m","outputs":{"o":{"kind":"server","name":"o","mime":"x","size":-1,"id":"i","url":"u"}}}`},
		{"server_message", `{"type":"error","id":"a","error":{"code":"Error"}}`},
		{"server_message", `{"type":"display_push","slot":{"renderer":"r","id":"s"}}`},
		{"server_message", `{"type":"hello","session_id":"s","capabilities":[]}`},
		{"server_message", `{"type":"event","id":"a","event_type":"x","data":{},"extra":1}`},
	}
	for _, tt := range tests {
		if err := validate(s, s.def(t, tt.def), decodeNumbers(t, []byte(tt.frame))); err == nil {
			t.Errorf("validate(%s, $defs/%s) = nil, want an error", tt.frame, tt.def)
		}
	}
}

// schemaTypes maps schema definitions to the Go types that encode them.
// For FileRef, whose MarshalJSON writes one struct per kind, the per-kind
// wire structs stand in.
var schemaTypes = map[string]reflect.Type{
	"prompt":              reflect.TypeFor[Prompt](),
	"abort":               reflect.TypeFor[Abort](),
	"display_resolve":     reflect.TypeFor[DisplayResolve](),
	"display_reject":      reflect.TypeFor[DisplayReject](),
	"ping":                reflect.TypeFor[Ping](),
	"client_hello":        reflect.TypeFor[ClientHello](),
	"event":               reflect.TypeFor[Event](),
	"slot":                reflect.TypeFor[Slot](),
	"display_push":        reflect.TypeFor[DisplayPush](),
	"display_clear":       reflect.TypeFor[DisplayClear](),
	"complete":            reflect.TypeFor[Complete](),
	"error_body":          reflect.TypeFor[ErrorBody](),
	"error":               reflect.TypeFor[Error](),
	"pong":                reflect.TypeFor[Pong](),
	"server_hello":        reflect.TypeFor[ServerHello](),
	"draining":            reflect.TypeFor[Draining](),
	"egress_set":          reflect.TypeFor[EgressSet](),
	"egress_policy":       reflect.TypeFor[EgressPolicy](),
	"network_spec":        reflect.TypeFor[NetworkSpec](),
	"request_rule":        reflect.TypeFor[RequestRule](),
	"inline_ref":          reflect.TypeFor[inlineWire](),
	"url_ref":             reflect.TypeFor[urlWire](),
	"server_ref":          reflect.TypeFor[serverWire](),
	"s3_ref":              reflect.TypeFor[s3Wire](),
	"gcs_ref":             reflect.TypeFor[gcsWire](),
	"outputs_override":    reflect.TypeFor[OutputsOverride](),
	"s3_override":         reflect.TypeFor[S3Override](),
	"environment":         reflect.TypeFor[Environment](),
	"health":              reflect.TypeFor[Health](),
	"isolation":           reflect.TypeFor[Isolation](),
	"egress_environment":  reflect.TypeFor[EgressEnvironment](),
	"warm_environment":    reflect.TypeFor[WarmEnvironment](),
	"provenance":          reflect.TypeFor[Provenance](),
	"locked_input":        reflect.TypeFor[LockedInput](),
	"runs_spec":           reflect.TypeFor[RunsSpec](),
	"run_record":          reflect.TypeFor[RunRecord](),
	"run_file":            reflect.TypeFor[RunFile](),
	"run_egress_decision": reflect.TypeFor[RunEgressDecision](),
	"signed_run":          reflect.TypeFor[SignedRun](),
	"exit_info":           reflect.TypeFor[ExitInfo](),
	"terminal_request":    reflect.TypeFor[TerminalRequest](),
	"terminal":            reflect.TypeFor[Terminal](),
	"term_control":        reflect.TypeFor[TermControl](),
	"process_request":     reflect.TypeFor[ProcessRequest](),
	"process":             reflect.TypeFor[Process](),
	"process_output":      reflect.TypeFor[ProcessOutput](),
	"process_signal":      reflect.TypeFor[ProcessSignal](),
	"run_chain":           reflect.TypeFor[RunChain](),
	"fs_entry":            reflect.TypeFor[FSEntry](),
	"fs_list":             reflect.TypeFor[FSList](),
	"fs_event":            reflect.TypeFor[FSEvent](),
	"fs_op":               reflect.TypeFor[FSOp](),
	"preview_request":     reflect.TypeFor[PreviewRequest](),
	"preview":             reflect.TypeFor[Preview](),
	"preview_list":        reflect.TypeFor[PreviewList](),
	"snapshot_manifest":   reflect.TypeFor[SnapshotManifest](),
	"snapshot_entry":      reflect.TypeFor[SnapshotEntry](),
	"snapshot_skip":       reflect.TypeFor[SnapshotSkip](),
	"snapshot_info":       reflect.TypeFor[SnapshotInfo](),
	"snapshot_list":       reflect.TypeFor[SnapshotList](),
	"restore_request":     reflect.TypeFor[RestoreRequest](),
	"restore_result":      reflect.TypeFor[RestoreResult](),
	"fork_request":        reflect.TypeFor[ForkRequest](),
	"fork_result":         reflect.TypeFor[ForkResult](),
}

// messageDefs are the definitions whose frames carry "type", which Encode
// writes outside the struct.
var messageDefs = []string{
	"prompt", "abort", "display_resolve", "display_reject", "ping", "client_hello",
	"event", "display_push", "display_clear", "complete", "error", "pong", "server_hello", "draining",
	"egress_set", "egress_policy",
}

// TestSchemaGoTypes checks every mapped Go struct against its definition:
// the same JSON field names, required exactly when not omitempty, and a
// JSON type that matches the Go field's kind.
func TestSchemaGoTypes(t *testing.T) {
	t.Parallel()
	s := loadSchema(t)
	defs, _ := s["$defs"].(map[string]any)
	for _, name := range sortedKeys(defs) {
		d := defs[name].(map[string]any)
		if d["type"] == "object" {
			if _, ok := schemaTypes[name]; !ok {
				t.Errorf("$defs/%s is an object with no Go type in schemaTypes", name)
			}
		}
	}
	for _, name := range sortedKeys(schemaTypes) {
		t.Run(name, func(t *testing.T) {
			typ := schemaTypes[name]
			d := s.def(t, name)
			props, _ := d["properties"].(map[string]any)
			wantProps, wantReq := []string{}, []string{}
			for i := range typ.NumField() {
				f := typ.Field(i)
				tag := f.Tag.Get("json")
				jname, opts, _ := strings.Cut(tag, ",")
				if jname == "-" || !f.IsExported() && !strings.HasSuffix(typ.Name(), "Wire") {
					continue
				}
				if jname == "" {
					jname = f.Name
				}
				wantProps = append(wantProps, jname)
				if !strings.Contains(opts, "omitempty") {
					wantReq = append(wantReq, jname)
				}
				p, ok := props[jname].(map[string]any)
				if !ok {
					continue // reported by the field-set diff below
				}
				if err := fieldMatches(s, f.Type, p); err != nil {
					t.Errorf("%s.%s (json %q): %v", typ.Name(), f.Name, jname, err)
				}
			}
			if slices.Contains(messageDefs, name) {
				wantProps = append(wantProps, "type")
				wantReq = append(wantReq, "type")
			}
			sort.Strings(wantProps)
			sort.Strings(wantReq)
			gotReq := asStrings(d["required"])
			sort.Strings(gotReq)
			if diff := cmp.Diff(wantProps, sortedKeys(props)); diff != "" {
				t.Errorf("$defs/%s properties differ from %s's JSON fields (-go +schema):\n%s", name, typ.Name(), diff)
			}
			if diff := cmp.Diff(wantReq, gotReq); diff != "" {
				t.Errorf("$defs/%s required differs from %s's fields without omitempty (-go +schema):\n%s", name, typ.Name(), diff)
			}
		})
	}
}

// fieldMatches checks that a property schema fits a Go field type.
func fieldMatches(root jschema, ft reflect.Type, p map[string]any) error {
	if ft == reflect.TypeFor[json.RawMessage]() {
		if _, ok := p["type"]; ok {
			return fmt.Errorf("raw JSON field, but the schema restricts it to type %v", p["type"])
		}
		return nil
	}
	if ft == reflect.TypeFor[FileRef]() {
		if p["$ref"] != "#/$defs/file_ref" {
			return fmt.Errorf("a FileRef, want $ref #/$defs/file_ref, got %v", p)
		}
		return nil
	}
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	if ft == reflect.TypeFor[time.Time]() {
		if p["type"] != "string" {
			return fmt.Errorf("a time (RFC 3339 in JSON), want type string, got %v", p["type"])
		}
		return nil
	}
	if ref, ok := p["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/$defs/")
		if schemaTypes[name] != ft {
			return fmt.Errorf("schema refers to %s (Go %v), field is %v", name, schemaTypes[name], ft)
		}
		return nil
	}
	want := ""
	switch ft.Kind() {
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Int32, reflect.Uint32:
		want = "integer"
	case reflect.Map, reflect.Struct:
		want = "object"
	case reflect.Slice:
		want = "array"
	default:
		return fmt.Errorf("no JSON type for Go kind %v", ft.Kind())
	}
	if p["type"] != want {
		return fmt.Errorf("schema type %v, want %s", p["type"], want)
	}
	if want == "array" {
		items, _ := p["items"].(map[string]any)
		if items == nil {
			return fmt.Errorf("array without items")
		}
		return fieldMatches(root, ft.Elem(), items)
	}
	if want == "object" && ft.Kind() == reflect.Map {
		if ap, ok := p["additionalProperties"].(map[string]any); ok {
			return fieldMatches(root, ft.Elem(), ap)
		}
	}
	return nil
}

// TestSchemaConstants checks the schema's enums and message type consts
// against the constants declared in this package's source, so that a code,
// capability, kind, scope or message type added on one side fails here
// until the other has it.
func TestSchemaConstants(t *testing.T) {
	t.Parallel()
	consts := packageConstants(t)
	s := loadSchema(t)
	enums := []struct{ def, prefix string }{
		{"capability", "Cap"},
		{"error_code", "Code"},
		{"file_kind", "Kind"},
		{"token_scope", "Scope"},
	}
	for _, e := range enums {
		got := asStrings(s.def(t, e.def)["enum"])
		sort.Strings(got)
		want := consts[e.prefix]
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("$defs/%s enum differs from the %s* constants (-go +schema):\n%s", e.def, e.prefix, diff)
		}
	}
	var got []string
	for _, name := range messageDefs {
		props, _ := s.def(t, name)["properties"].(map[string]any)
		typ, _ := props["type"].(map[string]any)
		c, _ := typ["const"].(string)
		if !slices.Contains(got, c) {
			got = append(got, c)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff(consts["Type"], got); diff != "" {
		t.Errorf("message definitions' type consts differ from the Type* constants (-go +schema):\n%s", diff)
	}
}

// packageConstants returns the string constants of this package's
// non-test files, by name prefix (Cap, Code, Kind, Scope, Type), sorted
// and deduplicated.
func packageConstants(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, decl := range file.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					val, _ := strconv.Unquote(lit.Value)
					for _, p := range []string{"Cap", "Code", "Kind", "Scope", "Type"} {
						if strings.HasPrefix(n.Name, p) && len(n.Name) > len(p) && isUpper(n.Name[len(p)]) && !slices.Contains(out[p], val) {
							out[p] = append(out[p], val)
						}
					}
				}
			}
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
