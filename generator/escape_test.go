package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/protocol"
)

func testKeyFingerprint() string { return protocol.Fingerprint(testKey) }

// hostile are strings that try to break out of a literal in each of the
// languages the generator writes.
var hostile = []string{
	"plain",
	"",
	"${evil}",
	"$${evil}",
	"''${evil}",
	"\\${evil}",
	`"; rm -rf / #`,
	"it's",
	"'\\''",
	"`id`",
	"$(id)",
	"line one\nline two",
	"tab\there\r\n",
	"back\\slash\\",
	"\"\"\"triple",
	"'''triple",
	"ünïcødé ✓ 🎉",
	"*/ --> ]]",
}

// shellWords splits words the way a real POSIX shell does.
func shellWords(t *testing.T, words string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "printf '%s\\0' "+words).Output()
	if err != nil {
		t.Fatalf("sh -c printf %s: %v", words, err)
	}
	s := strings.TrimSuffix(string(out), "\x00")
	if s == "" && !bytes.Contains(out, []byte{0}) {
		return nil
	}
	return strings.Split(s, "\x00")
}

func TestShellquoteRoundTrips(t *testing.T) {
	t.Parallel()
	for _, s := range hostile {
		got := shellWords(t, shellquote(s))
		if len(got) != 1 || got[0] != s {
			t.Errorf("sh(shellquote(%q)) = %q, want the one word %q", s, got, s)
		}
	}
	if got := shellWords(t, shelljoin(hostile)); !cmp.Equal(got, hostile) {
		t.Errorf("sh(shelljoin(hostile)) mismatch (-want +got):\n%s", cmp.Diff(hostile, got))
	}
}

func TestTomlstrRoundTrips(t *testing.T) {
	t.Parallel()
	for _, s := range append(hostile, "\x00\x01\x7f\b\f") {
		doc := "k = " + tomlstr(s) + "\nl = " + tomllist([]string{s, s}) + "\n"
		var got struct {
			K string   `toml:"k"`
			L []string `toml:"l"`
		}
		dec := toml.NewDecoder(strings.NewReader(doc))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Errorf("tomlstr(%q) = %s does not decode: %v", s, tomlstr(s), err)
			continue
		}
		if got.K != s || !cmp.Equal(got.L, []string{s, s}) {
			t.Errorf("toml round trip of %q = %q %q", s, got.K, got.L)
		}
	}
}

func TestJSONstrRoundTrips(t *testing.T) {
	t.Parallel()
	for _, s := range hostile {
		var got string
		if err := json.Unmarshal([]byte(jsonstr(s)), &got); err != nil || got != s {
			t.Errorf("json round trip of %q = %q, %v", s, got, err)
		}
	}
}

func TestEnvvalueRoundTripsThroughShell(t *testing.T) {
	t.Parallel()
	for _, s := range hostile {
		if strings.ContainsAny(s, "\n\r") {
			continue // the config refuses multi-line defaults
		}
		file := filepath.Join(t.TempDir(), ".env")
		if err := os.WriteFile(file, []byte("X="+envvalue(s)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("sh", "-c", `. "$1" && printf %s "$X"`, "sh", file).Output()
		if err != nil {
			t.Fatalf("sourcing X=%s: %v", envvalue(s), err)
		}
		if string(out) != s {
			t.Errorf("sh . (X=%s) gives %q, want %q", envvalue(s), out, s)
		}
	}
}

func TestCommentStaysOneLine(t *testing.T) {
	t.Parallel()
	for _, s := range hostile {
		if c := comment(s); strings.ContainsAny(c, "\n\r") {
			t.Errorf("comment(%q) = %q spans lines", s, c)
		}
	}
}

// TestNixstrRoundTrips evaluates nixstr's output with a real Nix and
// checks that the value comes back unchanged: no interpolation, no early
// end of the string.
func TestNixstrRoundTrips(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	var expr strings.Builder
	expr.WriteString("[\n")
	for _, s := range hostile {
		expr.WriteString("  " + nixstr(s) + "\n")
	}
	expr.WriteString("  " + nixlist(hostile) + "\n")
	// Every hostile string and every keyword as an attribute name.
	keys := append([]string{"in", "or", "rec", "x'y", "a-b", "_"}, hostile...)
	expr.WriteString("  {\n")
	for i, k := range keys {
		expr.WriteString(fmt.Sprintf("    %s = %d;\n", nixkey(k), i))
	}
	expr.WriteString("  }\n]\n")
	file := filepath.Join(t.TempDir(), "strings.nix")
	if err := os.WriteFile(file, []byte(expr.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	nixtest.Parse(t, file)
	out, _ := nixtest.Run(t, "nix-instantiate", "--eval", "--strict", "--json", file)
	var got []json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if len(got) != len(hostile)+2 {
		t.Fatalf("nix gave %d values, want %d", len(got), len(hostile)+2)
	}
	var attrs map[string]int
	if err := json.Unmarshal(got[len(hostile)+1], &attrs); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if n, ok := attrs[k]; !ok || n != i {
			t.Errorf("nix attribute nixkey(%q) = %s did not read back as %q", k, nixkey(k), k)
		}
	}
	for i, s := range hostile {
		var v string
		if err := json.Unmarshal(got[i], &v); err != nil || v != s {
			t.Errorf("nix eval of nixstr(%q) = %s, want the same string", s, got[i])
		}
	}
	var list []string
	if err := json.Unmarshal(got[len(hostile)], &list); err != nil || !cmp.Equal(list, hostile) {
		t.Errorf("nix eval of nixlist(hostile) = %s", got[len(hostile)])
	}
}

// TestHostileBoxRoundTrips reads every hostile value back from each
// generated file with that file's own parser (TOML, JSON, a real shell) and
// checks it arrives unchanged. The flake is checked the same way by
// TestFlakesEvaluate with a real Nix.
func TestHostileBoxRoundTrips(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "hostile")
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	res := generateCase(t, dir, Options{})
	evil := c.Env["EVIL"].Default
	if !strings.Contains(evil, "${evil}") || !strings.Contains(evil, `"`) {
		t.Fatalf("the hostile case lost its teeth: %q", evil)
	}

	p, err := decodeNixpacks(fileData(t, res, NixpacksFile))
	if err != nil {
		t.Fatal(err)
	}
	if p.Variables["EVIL"] != evil || p.Variables["PLAIN"] != "a'b" {
		t.Errorf("nixpacks variables = %q, want the defaults unchanged", p.Variables)
	}

	m := c.Manifest(testKeyFingerprint())
	m.Provenance = provenance(c, Options{Nixpkgs: pins[DefaultBranch], KitVersion: "v0.1.0"})
	m.Runs = &protocol.RunsSpec{PublicKey: protocol.RunPublicKey(testKey)}
	want, err := marshalJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileData(t, res, ManifestFile); !bytes.Equal(got, want) {
		t.Errorf("glovebox.json differs from the manifest")
	}
	var back map[string]any
	if err := json.Unmarshal(fileData(t, res, ManifestFile), &back); err != nil {
		t.Fatalf("glovebox.json: %v", err)
	}
	cmd := back["agent"].(map[string]any)["command"].([]any)
	if cmd[2] != c.Agent.Command[2] {
		t.Errorf("agent command round trip = %q, want %q", cmd[2], c.Agent.Command[2])
	}

	file := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(file, fileData(t, res, EnvExampleFile), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "-c", `. "$1" && printf '%s\0%s' "$EVIL" "$PLAIN"`, "sh", file).Output()
	if err != nil {
		t.Fatalf("sourcing .env.example: %v", err)
	}
	if got := strings.Split(string(out), "\x00"); !cmp.Equal(got, []string{evil, "a'b"}) {
		t.Errorf(".env.example sourced by sh gives %q", got)
	}
}
