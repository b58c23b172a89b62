package nix_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/generator"
	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// pin is the nixpkgs pin generated boxes are locked to (generator/pins.json,
// read from real flake.lock files on that branch): the root flake locks the
// same nixpkgs.
var pin, _ = generator.NixpkgsPin(generator.DefaultBranch)

// lockFile renders a version-7 lock for the nixpkgs pin with narHash as
// Nix writes it: sorted keys, two-space indent, a trailing newline.
func lockFile(t *testing.T, narHash string) []byte {
	t.Helper()
	lock := map[string]any{
		"nodes": map[string]any{
			"nixpkgs": map[string]any{
				"locked": map[string]any{
					"lastModified": pin.LastModified,
					"narHash":      narHash,
					"owner":        "NixOS",
					"repo":         "nixpkgs",
					"rev":          pin.Rev,
					"type":         "github",
				},
				"original": map[string]any{
					"owner": "NixOS",
					"ref":   "nixos-26.05",
					"repo":  "nixpkgs",
					"type":  "github",
				},
			},
			"root": map[string]any{"inputs": map[string]any{"nixpkgs": "nixpkgs"}},
		},
		"root":    "root",
		"version": 7,
	}
	out, err := json.MarshalIndent(lock, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func TestFlakeLockIsThePin(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile(filepath.Join(nixtest.ModuleRoot(t), "flake.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if want := lockFile(t, pin.NarHash); !bytes.Equal(got, want) {
		t.Errorf("flake.lock =\n%s\nwant\n%s", got, want)
	}
}

func TestFlakeInputs(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	flake := filepath.Join(nixtest.ModuleRoot(t), "flake.nix")
	out, _ := nixtest.Run(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr",
		`builtins.mapAttrs (n: i: i.url) (import `+flake+`).inputs`)
	if got, want := strings.TrimSpace(string(out)), `{"nixpkgs":"github:NixOS/nixpkgs/nixos-26.05"}`; got != want {
		t.Errorf("flake.nix inputs = %s, want %s", got, want)
	}
}

// TestLockShapeOffline evaluates the root flake with its real lock, only
// narHash swapped for the stand-in's: Nix finds the stand-in registered as
// "source" and fetches nothing. This checks the lock's version, root and
// node wiring, and that "original" matches flake.nix (a mismatch makes Nix
// re-lock over the network, which fails offline).
func TestLockShapeOffline(t *testing.T) {
	t.Parallel()
	s := nixtest.StandInNixpkgs(t)
	dir := repo(t)
	copyDir := nixtest.CopyTree(t, dir, func(rel string, _ bool) bool { return true })
	real, err := os.ReadFile(filepath.Join(copyDir, "flake.lock"))
	if err != nil {
		t.Fatal(err)
	}
	swapped := bytes.Replace(real, []byte(pin.NarHash), []byte(s.NarHash), 1)
	if bytes.Equal(swapped, real) {
		t.Fatal("flake.lock does not carry the pin's narHash")
	}
	if err := os.WriteFile(filepath.Join(copyDir, "flake.lock"), swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	nixtest.EvalJSON(t, &got, "path:"+copyDir+"#packages", "--apply", "p: builtins.attrNames p")
	if strings.Join(got, " ") != "aarch64-linux x86_64-linux" {
		t.Errorf("packages systems = %v", got)
	}
}

// TestParseNixFiles runs nix-instantiate --parse on every .nix file in the
// repository.
func TestParseNixFiles(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	root := nixtest.ModuleRoot(t)
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".nix") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("found %d .nix files, want the flake, nix/, baseimages/ and the stand-in", len(files))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) { nixtest.Parse(t, f) })
	}
}

// TestLockFormatIsNixs lets Nix write a lock and checks that re-rendering
// it the way lockFile does gives the same bytes: what TestFlakeLockIsThePin
// compares against is Nix's own format.
func TestLockFormatIsNixs(t *testing.T) {
	t.Parallel()
	s := nixtest.StandInNixpkgs(t)
	dir := t.TempDir()
	flake := `{ inputs.nixpkgs.url = "path:` + s.Dir + `"; outputs = { self, nixpkgs }: { }; }` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "flake.nix"), []byte(flake), 0o644); err != nil {
		t.Fatal(err)
	}
	nixtest.Run(t, "nix", "flake", "lock", "--offline", "path:"+dir)
	written, err := os.ReadFile(filepath.Join(dir, "flake.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(written, &v); err != nil {
		t.Fatal(err)
	}
	again, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if again = append(again, '\n'); !bytes.Equal(written, again) {
		t.Errorf("Nix wrote\n%s\nre-rendered\n%s", written, again)
	}
	if !bytes.Contains(written, []byte(`"version": 7`)) {
		t.Errorf("Nix wrote a lock that is not version 7:\n%s", written)
	}
}
