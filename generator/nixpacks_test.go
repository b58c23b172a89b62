package generator

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// The types below mirror nixpacks' own serde schema (BuildPlan, Phase and
// StartPhase in src/nixpacks/plan, camelCase, with serde's aliases as extra
// fields). nixpacks ignores unknown keys; decoding strictly into these types
// turns such a key into a test failure.
type nixpacksPlan struct {
	Providers    *[]string                `toml:"providers"`
	BuildImage   string                   `toml:"buildImage"`
	Variables    map[string]string        `toml:"variables"`
	StaticAssets map[string]string        `toml:"staticAssets"`
	Phases       map[string]nixpacksPhase `toml:"phases"`
	Start        *nixpacksStart           `toml:"start"`
}

type nixpacksPhase struct {
	DependsOn        []string `toml:"dependsOn"`
	NixPkgs          []string `toml:"nixPkgs"`
	NixPackages      []string `toml:"nixPackages"` // alias of nixPkgs
	NixLibs          []string `toml:"nixLibs"`
	NixLibraries     []string `toml:"nixLibraries"` // alias of nixLibs
	NixOverlays      []string `toml:"nixOverlays"`
	NixpkgsArchive   string   `toml:"nixpkgsArchive"`
	AptPkgs          []string `toml:"aptPkgs"`
	AptPackages      []string `toml:"aptPackages"` // alias of aptPkgs
	Cmds             []string `toml:"cmds"`
	Commands         []string `toml:"commands"` // alias of cmds
	OnlyIncludeFiles []string `toml:"onlyIncludeFiles"`
	CacheDirectories []string `toml:"cacheDirectories"`
	Paths            []string `toml:"paths"`
	EnvPaths         []string `toml:"envPaths"` // alias of paths
}

type nixpacksStart struct {
	Cmd              string   `toml:"cmd"`
	RunImage         string   `toml:"runImage"`
	OnlyIncludeFiles []string `toml:"onlyIncludeFiles"`
	User             string   `toml:"user"`
}

// decodeNixpacks decodes strictly. go-toml matches keys to fields without
// regard to case, where serde is exact, so every key is also checked
// against the exact tag names.
func decodeNixpacks(data []byte) (*nixpacksPlan, error) {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p nixpacksPlan
	if err := dec.Decode(&p); err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if err := exactKeys("", raw, reflect.TypeOf(p)); err != nil {
		return nil, err
	}
	return &p, nil
}

func exactKeys(path string, v any, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		for k, e := range m {
			if err := exactKeys(path+"."+k, e, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for k, e := range m {
			var field *reflect.StructField
			for i := 0; i < t.NumField(); i++ {
				if f := t.Field(i); f.Tag.Get("toml") == k {
					field = &f
				}
			}
			if field == nil {
				return fmt.Errorf("%s.%s: nixpacks has no such key (keys are case-sensitive)", path, k)
			}
			if err := exactKeys(path+"."+k, e, field.Type); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestNixpacksSchemaIsStrict shows that the strict decoding catches keys
// nixpacks would silently ignore.
func TestNixpacksSchemaIsStrict(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"[phases.install]\ncmd = [\"x\"]\n", // the key is cmds
		"[start]\ncommand = \"x\"\n",
		"provider = []\n",
		"[phases.setup]\nnixpkgs = [\"jq\"]\n",
	} {
		if _, err := decodeNixpacks([]byte(bad)); err == nil {
			t.Errorf("decodeNixpacks(%q) = nil error, want an unknown-key error", bad)
		}
	}
}

func TestNixpacks(t *testing.T) {
	t.Parallel()
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			c, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			res := generateCase(t, dir, Options{})
			p, err := decodeNixpacks(fileData(t, res, NixpacksFile))
			if err != nil {
				t.Fatalf("nixpacks.toml does not match nixpacks' schema: %v", err)
			}
			if p.Providers == nil || len(*p.Providers) != 0 {
				t.Errorf("providers = %v, want [] (no auto-detection)", p.Providers)
			}
			setup := checkNixpacksSetup(t, c, p)
			checkNixpacksPhases(t, p)
			checkNixpacksDirs(t, c, p)
			checkNixpacksPython(t, c, p, setup)
		})
	}
}

// checkNixpacksSetup checks the setup phase: the flake's nixpkgs, and
// every package of the box and its base as a nixpkgs attribute or in the
// Python environment. It returns the phase.
func checkNixpacksSetup(t *testing.T, c *Config, p *nixpacksPlan) nixpacksPhase {
	t.Helper()
	setup, ok := p.Phases["setup"]
	if !ok {
		t.Fatal("no setup phase")
	}
	if want := pins[DefaultBranch].Rev; setup.NixpkgsArchive != want {
		t.Errorf("nixpkgsArchive = %q, want the flake's pin %q", setup.NixpkgsArchive, want)
	}
	pyEnvRE := regexp.MustCompile(`^\(python3\.withPackages \(ps: \[( ps\."[a-z0-9._-]+")+ \]\)\)$`)
	for _, pkg := range setup.NixPkgs {
		if !nixAttrRE.MatchString(pkg) && !pyEnvRE.MatchString(pkg) {
			t.Errorf("nixPkgs holds %q, not a nixpkgs attribute path or a python3.withPackages", pkg)
		}
	}
	for _, pkg := range append(append(baseSpecs["base"].Nix, baseSpecs[c.Base].Nix...), c.Packages.Nix...) {
		if strings.HasPrefix(pkg, "python3Packages.") {
			continue // in the Python environment
		}
		if !slices.Contains(setup.NixPkgs, pkg) {
			t.Errorf("nixPkgs = %v, want it to hold %q", setup.NixPkgs, pkg)
		}
	}
	return setup
}

// checkNixpacksPhases checks that no phase installs apt packages, the
// phases' order, the kit's install and start, and its manifest.
func checkNixpacksPhases(t *testing.T, p *nixpacksPlan) {
	t.Helper()
	for _, ph := range p.Phases {
		if len(ph.AptPkgs)+len(ph.AptPackages) > 0 {
			t.Errorf("a phase installs apt packages: %v", ph.AptPkgs)
		}
	}
	if got := p.Phases["install"].DependsOn; !cmp.Equal(got, []string{"setup"}) {
		t.Errorf("install.dependsOn = %v, want [setup]", got)
	}
	if got := p.Phases["build"].DependsOn; !cmp.Equal(got, []string{"install"}) {
		t.Errorf("build.dependsOn = %v, want [install]", got)
	}
	if !strings.Contains(strings.Join(p.Phases["install"].Cmds, "\n"), "go install -trimpath "+KitModule+"@") {
		t.Errorf("install cmds %q do not install the kit", p.Phases["install"].Cmds)
	}
	if !strings.Contains(strings.Join(p.Phases["install"].Cmds, "\n"), " "+SupervisorModule+"@") {
		t.Errorf("install cmds %q do not install the sandbox supervisor beside the kit", p.Phases["install"].Cmds)
	}
	if p.Start == nil || p.Start.Cmd != "exec /app/bin/glovebox-kit" {
		t.Errorf("start = %+v, want the kit", p.Start)
	}
	if got := p.Variables["GLOVEBOX_MANIFEST"]; got != "/app/glovebox.json" {
		t.Errorf("GLOVEBOX_MANIFEST = %q, want /app/glovebox.json", got)
	}
}

// checkNixpacksDirs checks the fs layout: every mount path and the kit's
// state directory is created by one mkdir whose words, run through a real
// shell, are exactly the paths.
func checkNixpacksDirs(t *testing.T, c *Config, p *nixpacksPlan) {
	t.Helper()
	build := p.Phases["build"].Cmds
	if len(build) != 1 || !strings.HasPrefix(build[0], "mkdir -p ") {
		t.Fatalf("build cmds = %q, want one mkdir -p", build)
	}
	var want []string
	for _, k := range sortedKeys(c.FS) {
		want = append(want, c.FS[k].Path)
	}
	want = append(want, "/var/glovebox/files")
	got := shellWords(t, strings.TrimPrefix(build[0], "mkdir -p "))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mkdir paths mismatch (-want +got):\n%s", diff)
	}
}

// checkNixpacksPython checks that Python libraries are in one Python
// environment, as in the Nix image: pip names and python3Packages.X under
// packages.nix.
func checkNixpacksPython(t *testing.T, c *Config, p *nixpacksPlan, setup nixpacksPhase) {
	t.Helper()
	var wantPy []string
	for _, n := range append(append([]string(nil), baseSpecs[c.Base].Pip...), c.Packages.Pip...) {
		wantPy = append(wantPy, pythonAttr(n))
	}
	for _, n := range c.Packages.Nix {
		if name, ok := strings.CutPrefix(n, "python3Packages."); ok {
			wantPy = append(wantPy, name)
		}
	}
	if len(wantPy) > 0 {
		env := setup.NixPkgs[len(setup.NixPkgs)-1]
		for _, n := range wantPy {
			if !strings.Contains(env, ` ps."`+n+`"`) {
				t.Errorf("nixPkgs' Python %q lacks %s", env, n)
			}
		}
		if strings.Contains(strings.Join(p.Phases["install"].Cmds, "\n"), "pip install") {
			t.Errorf("install cmds pip-install: %q", p.Phases["install"].Cmds)
		}
	}
}

func fileData(t *testing.T, res *Result, name string) []byte {
	t.Helper()
	for _, f := range res.Files {
		if f.Name == name {
			return f.Data
		}
	}
	t.Fatalf("Generate made no %s", name)
	return nil
}

// TestNixpacksGoIsTheFlakes: nixpacks builds the kit with the nixpkgs Go
// that nix/go.nix builds it with in the flake.
func TestNixpacksGoIsTheFlakes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "nix", "go.nix"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*go = pkgs\.(go_[0-9_]+);`).FindSubmatch(src)
	if m == nil {
		t.Fatal("nix/go.nix: no `go = pkgs.go_X_Y;` line")
	}
	if string(m[1]) != GoAttr {
		t.Errorf("nix/go.nix builds with %s, nixpacks with %s: keep them equal", m[1], GoAttr)
	}
	res := generateCase(t, filepath.Join("testdata", "minimal"), Options{})
	plan, err := decodeNixpacks(fileData(t, res, NixpacksFile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.Phases["setup"].NixPkgs, GoAttr) {
		t.Errorf("nixpacks setup nixPkgs %v lack %s", plan.Phases["setup"].NixPkgs, GoAttr)
	}
}

// TestNixpacksPythonEvaluates evaluates the Python entry of the python
// box's nixPkgs as nixpacks writes it (inside `with pkgs; [ ... ]`)
// against the stand-in nixpkgs: it names a real python3.withPackages with
// every package.
func TestNixpacksPythonEvaluates(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	res := generateCase(t, filepath.Join("testdata", "python"), Options{})
	plan, err := decodeNixpacks(fileData(t, res, NixpacksFile))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := plan.Phases["setup"].NixPkgs
	entry := pkgs[len(pkgs)-1]
	stub := nixtest.StandInDir(t)
	expr := fmt.Sprintf(`let
  lib = import %[1]s/lib.nix;
  pkgs = import %[1]s/pkgs.nix { inherit lib; system = "x86_64-linux"; };
in with pkgs; builtins.concatStringsSep "," (builtins.head [ %[2]s ]).standIn.args.packages`, stub, entry)
	out, stderr, err := nixtest.Try(t.Context(), "nix-instantiate", "--eval", "--strict", "--expr", expr)
	if err != nil {
		t.Fatalf("nixpacks' Python entry %s does not evaluate: %s", entry, stderr)
	}
	if got, want := strings.TrimSpace(string(out)), `"numpy,pandas,pillow,scipy,matplotlib,requests,rich"`; got != want {
		t.Errorf("with pkgs; [ %s ]: a Python with %s, want %s", entry, got, want)
	}
}
