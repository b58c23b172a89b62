package generator

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// imageInfo is what the tests read back from an evaluated image.
type imageInfo struct {
	Function string `json:"function"`
	// KitInstall is the postInstall of a Go agent's kit (lib.buildAgent).
	KitInstall string `json:"kitInstall"`
	Name       string `json:"name"`
	Tag        string `json:"tag"`
	Same       bool   `json:"same"`
	Glovebox   struct {
		Base           string            `json:"base"`
		Version        string            `json:"version"`
		UID            int               `json:"uid"`
		Packages       []string          `json:"packages"`
		PythonPackages []string          `json:"pythonPackages"`
		Contents       []string          `json:"contents"`
		Env            map[string]string `json:"env"`
		ManifestPath   string            `json:"manifestPath"`
		Layout         []struct {
			Path  string `json:"path"`
			Mode  string `json:"mode"`
			Owner string `json:"owner"`
		} `json:"layout"`
	} `json:"glovebox"`
	Manifest json.RawMessage `json:"manifest"`
	// Config and FakeRoot are the arguments the stand-in's
	// streamLayeredImage recorded.
	Config   imageConfig `json:"config"`
	FakeRoot string      `json:"fakeRoot"`
	// Npm are the image's buildNpmPackage contents, with the arguments
	// importNpmLock recorded (the lock's packages).
	Npm []struct {
		Pname string `json:"pname"`
		Deps  struct {
			Packages     []string          `json:"packages"`
			Dependencies map[string]string `json:"dependencies"`
		} `json:"deps"`
		Hook string `json:"hook"`
	} `json:"npm"`
	Contents []string `json:"contents"`
}

// env is the image's Env as a map.
func (img imageInfo) env() map[string]string {
	env := map[string]string{}
	for _, kv := range img.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

type imageConfig struct {
	User         string              `json:"User"`
	WorkingDir   string              `json:"WorkingDir"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	Env          []string            `json:"Env"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
}

const imageApply = `packages: builtins.mapAttrs (system: p: {
  function = p.default.standIn.function;
  name = p.default.standIn.args.name;
  tag = p.default.standIn.args.tag;
  same = p.default.drvPath == p.image.drvPath;
  glovebox = p.default.passthru.glovebox;
  config = p.default.standIn.args.config;
  fakeRoot = p.default.standIn.args.fakeRootCommands;
  contents = map (c: c.pname or c.name) p.default.standIn.args.contents;
  kitInstall = builtins.concatStringsSep "" (map (c: c.standIn.args.postInstall or "") (builtins.filter (c: builtins.match ".*-agent" (c.pname or "") != null) p.default.standIn.args.contents));
  npm = map (c: { pname = c.pname; function = c.standIn.function; deps = c.standIn.args.npmDeps; hook = c.standIn.args.npmConfigHook.pname or null; })
    (builtins.filter (c: (c.standIn.function or "") == "buildNpmPackage") p.default.standIn.args.contents);
  manifest = builtins.fromJSON (builtins.readFile p.default.passthru.sbom.standIn.args.manifest);
}) packages`

// checkImage checks one system's image of c against what res generated:
// its configuration, environment and directories, packages, npm
// packages, and the manifest copied into it.
func checkImage(t *testing.T, system string, c *Config, res *Result, img imageInfo, manifest []byte) {
	t.Helper()
	kitName := checkImageConfig(t, system, c, img)
	checkImageEnv(t, system, c, img)
	checkImagePackages(t, system, c, img, kitName)
	checkImageNpm(t, system, c, res, img)
	// The manifest copied into the image is the generated glovebox.json.
	var want, got any
	if err := json.Unmarshal(manifest, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(img.Manifest, &got); err != nil {
		t.Fatalf("%s: image manifest: %v", system, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: manifest in the image differs from glovebox.json (-want +got):\n%s", system, diff)
	}
}

// checkImageConfig checks the image's name, user, ports and entrypoint,
// and returns the name of the kit's package.
func checkImageConfig(t *testing.T, system string, c *Config, img imageInfo) string {
	t.Helper()
	g := img.Glovebox
	if img.Function != "dockerTools.streamLayeredImage" {
		t.Errorf("%s: default is made by %q, want dockerTools.streamLayeredImage", system, img.Function)
	}
	if !img.Same {
		t.Errorf("%s: packages.default and packages.image differ", system)
	}
	if img.Name != c.Name || img.Tag != c.Version || g.Version != c.Version || g.Base != c.Base {
		t.Errorf("%s: image %s:%s base %s, want %s:%s base %s", system, img.Name, img.Tag, g.Base, c.Name, c.Version, c.Base)
	}
	if g.UID != 10001 || img.Config.User != "0:0" {
		t.Errorf("%s: uid %d user %q, want the glovebox user 10001 and the kit started as 0:0", system, g.UID, img.Config.User)
	}
	if img.Config.WorkingDir != "/work" {
		t.Errorf("%s: WorkingDir = %q, want /work", system, img.Config.WorkingDir)
	}
	if _, ok := img.Config.ExposedPorts["8080/tcp"]; !ok || len(img.Config.ExposedPorts) != 1 {
		t.Errorf("%s: ExposedPorts = %v, want 8080/tcp", system, img.Config.ExposedPorts)
	}
	kitBin, kitName := "/bin/glovebox-kit", "glovebox-kit"
	if c.AgentMain != "" { // a Go agent is its own kit, built by lib.buildAgent
		kitBin, kitName = "/bin/glovebox-agent", c.Name+"-agent"
		// with the small supervisor beside it, from the flake's glovebox-kit
		if !regexp.MustCompile(`install -m 0555 /nix/store/[a-z0-9]{32}-glovebox-kit-[^/]*/bin/glovebox-sandbox "\$out/bin/glovebox-sandbox"`).MatchString(img.KitInstall) {
			t.Errorf("%s: the Go agent's kit does not install glovebox-sandbox beside glovebox-agent; its postInstall:\n%s", system, img.KitInstall)
		}
	}
	if ep := img.Config.Entrypoint; len(ep) != 1 || !strings.HasSuffix(ep[0], "-"+kitName+"-0.1.0"+kitBin) {
		t.Errorf("%s: Entrypoint = %q, want %s's %s", system, ep, kitName, kitBin)
	}
	env := img.env()
	if env["GLOVEBOX_MANIFEST"] != "/etc/glovebox/glovebox.json" || g.ManifestPath != "/etc/glovebox/glovebox.json" {
		t.Errorf("%s: GLOVEBOX_MANIFEST = %q, want /etc/glovebox/glovebox.json", system, env["GLOVEBOX_MANIFEST"])
	}
	return kitName
}

// checkImageEnv checks the image's environment and the directories its
// fakeroot commands make.
func checkImageEnv(t *testing.T, system string, c *Config, img imageInfo) {
	t.Helper()
	env := img.env()
	// Environment defaults reach the image byte for byte, hostile or not;
	// secrets never do.
	for _, k := range sortedKeys(c.Env) {
		e := c.Env[k]
		got, ok := env[k]
		switch {
		case e.Secret && ok:
			t.Errorf("%s: secret %s is baked into the image", system, k)
		case !e.Secret && e.Default != "" && got != e.Default:
			t.Errorf("%s: env %s = %q, want %q", system, k, got, e.Default)
		}
	}
	// The directories the kit writes are created and given to uid 10001
	// by the image's fakeroot commands.
	// Paths may or may not be shell-quoted.
	for _, d := range []string{"/work", "/input", "/output", "/var/glovebox", "/var/glovebox/files"} {
		q := regexp.QuoteMeta(d)
		if !regexp.MustCompile(`mkdir -p '?\.`+q+`'?\n`).MatchString(img.FakeRoot) ||
			!regexp.MustCompile(`chown 10001:10001 '?\.`+q+`'?\n`).MatchString(img.FakeRoot) {
			t.Errorf("%s: fakeRootCommands do not create %s owned by 10001:\n%s", system, d, img.FakeRoot)
		}
	}
	if !regexp.MustCompile(` '?\./etc/glovebox/glovebox\.json'?\n`).MatchString(img.FakeRoot) {
		t.Errorf("%s: fakeRootCommands do not install the manifest:\n%s", system, img.FakeRoot)
	}
}

// checkImagePackages checks the image's Nix and Python packages and its
// contents.
func checkImagePackages(t *testing.T, system string, c *Config, img imageInfo, kitName string) {
	t.Helper()
	g := img.Glovebox
	// python3Packages.X under packages.nix go into the Python environment.
	var wantNix []string
	for _, p := range c.Packages.Nix {
		if name, ok := strings.CutPrefix(p, "python3Packages."); ok {
			if !slices.Contains(g.PythonPackages, name) {
				t.Errorf("%s: pythonPackages = %v, want %q from packages.nix", system, g.PythonPackages, name)
			}
			continue
		}
		wantNix = append(wantNix, p)
	}
	if diff := cmp.Diff(nonNil(wantNix), nonNil(g.Packages)); diff != "" {
		t.Errorf("%s: packages mismatch (-want +got):\n%s", system, diff)
	}
	for _, p := range c.Packages.Pip {
		if !slices.Contains(g.PythonPackages, pythonAttr(p)) {
			t.Errorf("%s: pythonPackages = %v, want %q", system, g.PythonPackages, pythonAttr(p))
		}
	}
	if !slices.Contains(img.Contents, kitName) {
		t.Errorf("%s: contents %v lack the kit %s", system, img.Contents, kitName)
	}
	for _, p := range wantNix {
		name := p[strings.LastIndex(p, ".")+1:]
		if !slices.Contains(img.Contents, name) {
			t.Errorf("%s: contents %v lack %s", system, img.Contents, p)
		}
	}
}

// checkImageNpm checks the image's npm packages against the lock in res.
func checkImageNpm(t *testing.T, system string, c *Config, res *Result, img imageInfo) {
	t.Helper()
	// [packages] npm: one package built from the lock in dist/npm with
	// importNpmLock, every package of the lock fetched.
	if len(c.Packages.Npm) == 0 {
		if len(img.Npm) != 0 {
			t.Errorf("%s: npm packages %+v in a box without [packages] npm", system, img.Npm)
		}
	} else {
		var l struct {
			Packages map[string]json.RawMessage `json:"packages"`
		}
		if err := json.Unmarshal(fileData(t, res, NpmLockFile), &l); err != nil {
			t.Fatal(err)
		}
		delete(l.Packages, "")
		if len(img.Npm) != 1 {
			t.Fatalf("%s: npm packages %+v, want one buildNpmPackage", system, img.Npm)
		}
		n := img.Npm[0]
		if n.Pname != c.Name+"-npm-packages" || n.Hook != "npm-config-hook" {
			t.Errorf("%s: npm package %+v, want %s-npm-packages with importNpmLock's npmConfigHook", system, n, c.Name)
		}
		if diff := cmp.Diff(sortedKeys(l.Packages), n.Deps.Packages); diff != "" {
			t.Errorf("%s: importNpmLock packages differ from the lock's (-lock +nix):\n%s", system, diff)
		}
		if diff := cmp.Diff(npmDeps(c.Packages.Npm), n.Deps.Dependencies); diff != "" {
			t.Errorf("%s: npm dependencies (-want +nix):\n%s", system, diff)
		}
	}
}

// checkFlakeBase checks an image built on testdata/bases' ml base: its
// packages, Python packages and env are in the image, with the common
// layer, and GLOVEBOX_BASE is the base as written.
func checkFlakeBase(t *testing.T, system string, c *Config, img imageInfo) {
	t.Helper()
	for _, p := range append([]string{"ripgrep", "unzip"}, baseSpecs["base"].Nix...) {
		if !slices.Contains(img.Contents, p) {
			t.Errorf("%s: contents %v lack %s", system, img.Contents, p)
		}
	}
	if !slices.Contains(img.Glovebox.PythonPackages, "numpy") {
		t.Errorf("%s: pythonPackages = %v, want the base's numpy", system, img.Glovebox.PythonPackages)
	}
	env := img.env()
	if env["ML_HOME"] != "/opt/ml" {
		t.Errorf("%s: env ML_HOME = %q, want the base's /opt/ml", system, env["ML_HOME"])
	}
	if env["GLOVEBOX_BASE"] != c.Base || img.Glovebox.Base != c.Base {
		t.Errorf("%s: GLOVEBOX_BASE = %q, passthru base %q, want %q", system, env["GLOVEBOX_BASE"], img.Glovebox.Base, c.Base)
	}
}
