package generator

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// These tests evaluate every golden box's generated flake with a real Nix
// against the stand-in nixpkgs (nix/testdata/nixpkgs) and the repository's
// own root flake (its lib.mkBox). The flake.lock is the one Generate writes,
// github-typed, with the stand-in's narHash: Nix finds the stand-in in the
// store under that hash and never fetches, so the lock's shape is exercised
// too. The glovebox input, which the lock leaves for the first networked
// lock, is overridden with path:<copy of the repository>.

func TestMain(m *testing.M) {
	testkit.Main(m, testkit.After(nixtest.RemoveRepoCopy))
}

// standInPin is the default nixpkgs pin with the stand-in's narHash.
func standInPin(s nixtest.StandIn) Pin {
	p := pins[DefaultBranch]
	p.NarHash = s.NarHash
	return p
}

func TestFlakesEvaluate(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	s := nixtest.StandInNixpkgs(t)
	root := nixtest.RepoCopy(t)
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			res := generateCase(t, filepath.Join("testdata", name), Options{Nixpkgs: standInPin(s)})
			out := t.TempDir()
			ref := "path:" + out
			if c.AgentMain != "" {
				// A Go agent's flake builds from the box directory, dist's
				// parent: lay out the box with its module and dist/ in it.
				box := out
				if err := os.CopyFS(box, os.DirFS(filepath.Join("testdata", name))); err != nil {
					t.Fatal(err)
				}
				os.RemoveAll(filepath.Join(box, "dist"))
				out = filepath.Join(box, "dist")
				// Nix 2.8 takes a flake in a subdirectory of a git tree
				// (newer Nix, as in the Dockerfile, also of a path:).
				ref = "git+file://" + box + "?dir=dist"
			}
			if _, err := Write(out, res.Files); err != nil {
				t.Fatal(err)
			}
			if c.AgentMain != "" {
				gitAdd(t, filepath.Dir(out))
			}
			nixtest.Parse(t, filepath.Join(out, FlakeFile))

			override := []string{"--no-write-lock-file", "--override-input", "glovebox", "path:" + root}
			if c.BaseFlake != "" {
				override = append(override, "--override-input", "base", "path:"+testBases(t))
			}
			_, stderr := nixtest.Run(t, "nix", append([]string{"flake", "check", "--no-build", "--offline"}, append(override, ref)...)...)
			nixtest.NoWarnings(t, "nix flake check", stderr)

			var images map[string]imageInfo
			nixtest.EvalJSON(t, &images, append(override, ref+"#packages", "--apply", imageApply)...)
			if len(images) != 2 {
				t.Fatalf("packages has systems %v, want x86_64-linux and aarch64-linux", sortedKeys(images))
			}
			manifest := fileData(t, res, ManifestFile)
			for _, system := range nixtest.Systems {
				img, ok := images[system]
				if !ok {
					t.Fatalf("no packages.%s", system)
				}
				checkImage(t, system, c, res, img, manifest)
				if c.BaseFlake != "" {
					checkFlakeBase(t, system, c, img)
				}
			}
		})
	}
}

// testBases is the example flake exposing lib.gloveboxBases.ml, passed
// in place of a box's base input.
func testBases(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFlakeBaseLockSurvivesNixLock lets a real Nix lock the base input
// of a box on another flake's base, then generates again: the nodes Nix
// wrote come back byte for byte.
func TestFlakeBaseLockSurvivesNixLock(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	s := nixtest.StandInNixpkgs(t)
	root := nixtest.RepoCopy(t)
	dir := filepath.Join("testdata", "flakebase")
	res := generateCase(t, dir, Options{Nixpkgs: standInPin(s)})
	if lock := fileData(t, res, LockFile); bytes.Contains(lock, []byte(`"base"`)) {
		t.Fatalf("the first lock names the base input, want it left for nix:\n%s", lock)
	}
	out := t.TempDir()
	if _, err := Write(out, res.Files); err != nil {
		t.Fatal(err)
	}
	nixtest.Run(t, "nix", "flake", "lock", "--offline", "--override-input", "glovebox", "path:"+root, "--override-input", "base", "path:"+testBases(t), "path:"+out)
	nixLock, err := os.ReadFile(filepath.Join(out, LockFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(nixLock, []byte(`"base": "base"`)) {
		t.Fatalf("nix flake lock did not add the base input:\n%s", nixLock)
	}
	again := generateCase(t, dir, Options{Nixpkgs: standInPin(s), PreviousLock: nixLock})
	if diff := cmp.Diff(string(nixLock), string(fileData(t, again, LockFile))); diff != "" {
		t.Errorf("regenerated lock differs from the one nix wrote (-nix +generated):\n%s", diff)
	}
	// The image evaluates from the completed lock alone.
	var label string
	nixtest.EvalJSON(t, &label, "--no-write-lock-file", "path:"+out+"#packages.x86_64-linux.default.passthru.glovebox.base")
	if label != "github:acme/glovebox-bases#ml" {
		t.Errorf("base label = %q, want the base as written", label)
	}
	// A box that leaves the flake base drops its node.
	c, err := Parse("glovebox.toml", []byte(`name = "ml"`))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Generate(c, Options{Key: testKey, Nixpkgs: standInPin(s), PreviousLock: nixLock})
	if err != nil {
		t.Fatal(err)
	}
	if lock := fileData(t, plain, LockFile); bytes.Contains(lock, []byte(`"base"`)) || !bytes.Contains(lock, []byte(`"glovebox"`)) {
		t.Errorf("lock after leaving the flake base:\n%s", lock)
	}
}

// TestFlakeLockShape checks what the offline path cannot: a lock whose
// original does not match flake.nix makes Nix try to re-lock, which fails
// offline. So a passing evaluation above proves the match; here the
// release-pinned variant is evaluated the same way, with the glovebox node
// present and then overridden.
func TestFlakeLockWithReleasePin(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	s := nixtest.StandInNixpkgs(t)
	root := nixtest.RepoCopy(t)
	rel := Pin{Owner: "glovebox-dev", Repo: "glovebox", Rev: strings.Repeat("ab", 20), NarHash: "sha256-" + strings.Repeat("A", 43) + "=", LastModified: 1790000000}
	res := generateCase(t, filepath.Join("testdata", "minimal"), Options{Nixpkgs: standInPin(s), Glovebox: &rel})
	lock := fileData(t, res, LockFile)
	var l struct {
		Nodes map[string]struct {
			Inputs   map[string]any    `json:"inputs"`
			Locked   map[string]any    `json:"locked"`
			Original map[string]string `json:"original"`
		} `json:"nodes"`
		Root    string `json:"root"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(lock, &l); err != nil {
		t.Fatal(err)
	}
	if l.Version != 7 || l.Root != "root" || l.Nodes["glovebox"].Locked["rev"] != rel.Rev {
		t.Fatalf("lock = %s", lock)
	}
	// The original names the release tag, as flake.nix's input does.
	if diff := cmp.Diff(map[string]string{"owner": "glovebox-dev", "repo": "glovebox", "ref": "v0.1.0", "type": "github"}, l.Nodes["glovebox"].Original); diff != "" {
		t.Errorf("glovebox original mismatch (-want +got):\n%s", diff)
	}
	if got := l.Nodes["glovebox"].Inputs["nixpkgs"]; !cmp.Equal(got, []any{"nixpkgs"}) {
		t.Errorf("glovebox.inputs.nixpkgs = %v, want follows [nixpkgs]", got)
	}
	out := t.TempDir()
	if _, err := Write(out, res.Files); err != nil {
		t.Fatal(err)
	}
	var name string
	nixtest.EvalJSON(t, &name, "--no-write-lock-file", "--override-input", "glovebox", "path:"+root, "path:"+out+"#packages.x86_64-linux.default.standIn.args.name")
	if name != "minimal" {
		t.Errorf("image name = %q, want minimal", name)
	}
}

// TestFlakeLockIsUsed shows the offline evaluation really goes through the
// generated lock: with a wrong narHash, Nix has to fetch, and fails.
func TestFlakeLockIsUsed(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	nixtest.StandInNixpkgs(t)
	root := nixtest.RepoCopy(t)
	res := generateCase(t, filepath.Join("testdata", "minimal"), Options{}) // the real nixpkgs hash: not in this store
	out := t.TempDir()
	if _, err := Write(out, res.Files); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := nixtest.Try(t.Context(), "nix", "eval", "--offline", "--no-write-lock-file", "--override-input", "glovebox", "path:"+root, "path:"+out+"#packages.x86_64-linux.default.name")
	if err == nil {
		t.Fatal("evaluation with an unavailable nixpkgs succeeded: the lock is not what Nix reads")
	}
	if !bytes.Contains(stderr, []byte("nixpkgs")) && !bytes.Contains(stderr, []byte("github")) {
		t.Errorf("unexpected failure: %s", stderr)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestBasesMatchNix evaluates baseimages/<base>.nix against the stand-in
// and checks that the table nixpacks builds use names the same packages,
// Python packages and (store-path-free) environment.
func TestBasesMatchNix(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	s := nixtest.StandInNixpkgs(t)
	root := nixtest.ModuleRoot(t)
	// Image plumbing from dockerTools, with no meaning outside a Nix image.
	nixOnly := []string{"ca-certificates", "usr-bin-env"}
	type facts struct {
		Packages []string          `json:"packages"`
		Python   []string          `json:"python"`
		Env      map[string]string `json:"env"`
	}
	// One evaluation for every base.
	var files []string
	for _, base := range Bases {
		files = append(files, nixstr(base)+" = "+filepath.Join(root, "baseimages", base+".nix")+";")
	}
	expr := `let
  pkgs = (builtins.getFlake "path:` + s.Dir + `").legacyPackages.x86_64-linux;
in builtins.mapAttrs (base: file: let b = import file { inherit pkgs; }; in {
  packages = map (p: p.pname or p.name) b.packages;
  python = b.pythonPackages;
  env = b.env;
}) { ` + strings.Join(files, " ") + ` }`
	var all map[string]facts
	nixtest.EvalJSON(t, &all, "--impure", "--expr", expr)

	// The root flake's bases are the generator's: a base added on one side
	// only would make boxes that nixpacks or Nix cannot build.
	var flakeBases []string
	nixtest.EvalJSON(t, &flakeBases, append(s.OverrideInput("nixpkgs"),
		"path:"+nixtest.RepoCopy(t)+"#lib.gloveboxBases", "--apply", "builtins.attrNames")...)
	if diff := cmp.Diff(slices.Sorted(slices.Values(Bases)), flakeBases); diff != "" {
		t.Errorf("lib.gloveboxBases differs from generator.Bases (-generator +flake):\n%s", diff)
	}
	for _, base := range Bases {
		t.Run(base, func(t *testing.T) {
			got, ok := all[base]
			if !ok {
				t.Fatalf("baseimages/%s.nix did not evaluate", base)
			}
			var nixPkgs []string
			for _, p := range got.Packages {
				if !slices.Contains(nixOnly, p) {
					nixPkgs = append(nixPkgs, p)
				}
			}
			spec := baseSpecs[base]
			if diff := cmp.Diff(nixPkgs, spec.Nix); diff != "" {
				t.Errorf("baseSpecs[%q].Nix differs from baseimages/%s.nix (-nix +table):\n%s", base, base, diff)
			}
			if diff := cmp.Diff(nonNil(got.Python), nonNil(spec.Pip)); diff != "" {
				t.Errorf("baseSpecs[%q].Pip differs from baseimages/%s.nix (-nix +table):\n%s", base, base, diff)
			}
			env := map[string]string{}
			for k, v := range got.Env {
				if !strings.Contains(v, "/nix/store/") {
					env[k] = v
				}
			}
			want := spec.Env
			if want == nil {
				want = map[string]string{}
			}
			if diff := cmp.Diff(env, want); diff != "" {
				t.Errorf("baseSpecs[%q].Env differs from baseimages/%s.nix (-nix +table):\n%s", base, base, diff)
			}
		})
	}
}

// TestLockSurvivesNixLock lets a real Nix complete the generated lock with
// the glovebox input, then generates again: the lock Nix wrote must come
// back byte for byte (its glovebox node kept, and the format the same as
// Nix's own), so `gbx generate --check` stays clean after `nix flake lock`.
func TestLockSurvivesNixLock(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	s := nixtest.StandInNixpkgs(t)
	root := nixtest.RepoCopy(t)
	dir := filepath.Join("testdata", "media")
	res := generateCase(t, dir, Options{Nixpkgs: standInPin(s)})
	out := t.TempDir()
	if _, err := Write(out, res.Files); err != nil {
		t.Fatal(err)
	}
	nixtest.Run(t, "nix", "flake", "lock", "--offline", "--override-input", "glovebox", "path:"+root, "path:"+out)
	nixLock, err := os.ReadFile(filepath.Join(out, LockFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(nixLock, fileData(t, res, LockFile)) || !bytes.Contains(nixLock, []byte(`"glovebox"`)) {
		t.Fatalf("nix flake lock did not add the glovebox input:\n%s", nixLock)
	}
	again := generateCase(t, dir, Options{Nixpkgs: standInPin(s), PreviousLock: nixLock})
	if diff := cmp.Diff(string(nixLock), string(fileData(t, again, LockFile))); diff != "" {
		t.Errorf("regenerated lock differs from the one nix wrote (-nix +generated):\n%s", diff)
	}
	drifts, err := Diff(out, again.Files)
	if err != nil || len(drifts) != 0 {
		t.Errorf("Diff after nix flake lock = %v, %v; want no drift", drifts, err)
	}
}

// gitAdd makes dir a git repository with every file added (Nix reads a
// dirty tree's added files).
func gitAdd(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
