package nix_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

const (
	uid = "10001:10001" // the glovebox user, which owns the writable directories
	// kitUser is the image's User: the kit starts as root and runs agents
	// under their own uids.
	kitUser = "0:0"
	epoch   = "1970-01-01T00:00:01Z"
)

type goFacts struct {
	Function    string         `json:"function"`
	Pname       string         `json:"pname"`
	Version     string         `json:"version"`
	SubPackages []string       `json:"subPackages"`
	Ldflags     []string       `json:"ldflags"`
	Env         map[string]any `json:"env"`
	VendorHash  string         `json:"vendorHash"`
	DoCheck     bool           `json:"doCheck"`
	GOFLAGS     []string       `json:"GOFLAGS"`
	Src         string         `json:"src"`
	MainProgram string         `json:"mainProgram"`
	Out         string         `json:"out"`
	GoVersion   string         `json:"goVersion"`
}

type layoutDir struct {
	Path  string `json:"path"`
	Mode  string `json:"mode"`
	Owner string `json:"owner"`
}

type imageConfig struct {
	User         string              `json:"User"`
	WorkingDir   string              `json:"WorkingDir"`
	Entrypoint   []string            `json:"Entrypoint"`
	Env          []string            `json:"Env"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Labels       map[string]string   `json:"Labels"`
}

type boxFacts struct {
	Function         string      `json:"function"`
	ImageName        string      `json:"imageName"`
	ImageTag         string      `json:"imageTag"`
	Name             string      `json:"name"`
	Tag              string      `json:"tag"`
	Created          string      `json:"created"`
	Mtime            string      `json:"mtime"`
	FakeRootCommands string      `json:"fakeRootCommands"`
	Config           imageConfig `json:"config"`
	Contents         []string    `json:"contents"`
	NSS              struct {
		Passwd []string `json:"extraPasswdLines"`
		Group  []string `json:"extraGroupLines"`
	} `json:"nss"`
	Python [][]string `json:"python"`
	// SBOM is the image's SBOM build: its output, which the image copies
	// the SBOM and the stamped manifest from, and the manifest it stamps.
	SBOM struct {
		Out      string `json:"out"`
		Manifest string `json:"manifest"`
	} `json:"sbom"`
	Glovebox struct {
		Base           string            `json:"base"`
		Version        string            `json:"version"`
		Tag            string            `json:"tag"`
		UID            int               `json:"uid"`
		Layout         []layoutDir       `json:"layout"`
		Config         imageConfig       `json:"config"`
		ManifestPath   string            `json:"manifestPath"`
		SBOMPath       string            `json:"sbomPath"`
		Packages       []string          `json:"packages"`
		PythonPackages []string          `json:"pythonPackages"`
		Contents       []string          `json:"contents"`
		Env            map[string]string `json:"env"`
	} `json:"glovebox"`
}

type systemFacts struct {
	Names   []string            `json:"names"`
	Default string              `json:"default"`
	Go      map[string]goFacts  `json:"go"`
	Boxes   map[string]boxFacts `json:"boxes"`
}

// packagesApply turns packages.<system> into the facts the tests assert,
// in one evaluation shared by every test.
const packagesApply = `ps: builtins.mapAttrs (sys: p: {
  names = builtins.attrNames p;
  default = p.default.name;
  go = builtins.mapAttrs (n: d: {
    inherit (d.standIn) function;
    inherit (d.standIn.args) pname version subPackages ldflags env vendorHash doCheck;
    GOFLAGS = d.standIn.args.GOFLAGS or [ ];
    src = "${d.standIn.args.src}";
    mainProgram = d.meta.mainProgram;
    out = d.outPath;
    goVersion = d.passthru.glovebox.goVersion;
  }) { inherit (p) glovebox-kit gbx; };
  boxes = builtins.listToAttrs (map (n: {
    name = n;
    value = let b = p.${n}; a = b.standIn.args; fn = f: builtins.filter (c: (c.standIn.function or "") == f) a.contents; in {
      inherit (b.standIn) function;
      inherit (b) imageName imageTag;
      inherit (a) name tag created mtime fakeRootCommands config;
      glovebox = b.passthru.glovebox;
      sbom = { out = b.passthru.sbom.outPath; manifest = b.passthru.sbom.standIn.args.manifest; };
      contents = map (c: c.name) a.contents;
      nss = (builtins.head (fn "dockerTools.fakeNss.override")).standIn.args;
      python = map (c: c.standIn.args.packages) (fn "python3.withPackages");
    };
  }) (builtins.filter (n: builtins.substring 0 4 n == "box-") (builtins.attrNames p)));
}) ps`

var packages struct {
	once  sync.Once
	facts map[string]systemFacts
}

func packageFacts(t *testing.T) map[string]systemFacts {
	t.Helper()
	repo(t)
	packages.once.Do(func() {
		evalRoot(t, &packages.facts, "packages", packagesApply)
	})
	if packages.facts == nil {
		t.Fatal("packages did not evaluate (see the first failing test)")
	}
	return packages.facts
}

func TestPackageNames(t *testing.T) {
	t.Parallel()
	facts := packageFacts(t)
	want := []string{"box-base", "box-browser", "box-docs", "box-media", "box-python", "default", "gbx", "glovebox-kit", "glovebox-sbom"}
	if diff := cmp.Diff(nixtest.Systems, slices.Sorted(func(yield func(string) bool) {
		for s := range facts {
			if !yield(s) {
				return
			}
		}
	}), cmpSorted()); diff != "" {
		t.Errorf("packages systems (-want +got):\n%s", diff)
	}
	for sys, f := range facts {
		if diff := cmp.Diff(want, f.Names); diff != "" {
			t.Errorf("packages.%s (-want +got):\n%s", sys, diff)
		}
		if f.Default != "gbx-0.1.0" {
			t.Errorf("packages.%s.default = %s, want gbx-0.1.0", sys, f.Default)
		}
	}
}

func cmpSorted() cmp.Option {
	return cmp.Transformer("sort", func(in []string) []string { return slices.Sorted(slices.Values(in)) })
}

func TestGoBinaries(t *testing.T) {
	t.Parallel()
	facts := packageFacts(t)
	hash, err := os.ReadFile(filepath.Join(nixtest.ModuleRoot(t), "nix", "vendor-hash.nix"))
	if err != nil {
		t.Fatal(err)
	}
	wantHash := strings.Trim(strings.TrimSpace(string(hash)), `"`)
	versionVar := map[string]string{
		"glovebox-kit": "github.com/glovebox-dev/glovebox/kit.Version",
		"gbx":          "github.com/glovebox-dev/glovebox/internal/cli.Version",
	}
	for sys, f := range facts {
		for name, g := range f.Go {
			t.Run(sys+"/"+name, func(t *testing.T) {
				if g.Function != "buildGoModule" {
					t.Errorf("built with %s, want buildGoModule", g.Function)
				}
				// The sandbox supervisor is installed beside each binary.
				if diff := cmp.Diff([]string{"cmd/" + name, "cmd/glovebox-sandbox"}, g.SubPackages); diff != "" {
					t.Errorf("subPackages (-want +got):\n%s", diff)
				}
				wantFlags := []string{"-s", "-w", "-X " + versionVar[name] + "=v0.1.0"}
				if diff := cmp.Diff(wantFlags, g.Ldflags); diff != "" {
					t.Errorf("ldflags (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(map[string]any{"CGO_ENABLED": float64(0)}, g.Env); diff != "" {
					t.Errorf("env (-want +got):\n%s", diff)
				}
				if slices.Contains(g.GOFLAGS, "-trimpath") {
					t.Errorf("GOFLAGS = %v: buildGoModule adds -trimpath itself", g.GOFLAGS)
				}
				if g.VendorHash != wantHash {
					t.Errorf("vendorHash = %s, want %s (nix/vendor-hash.nix)", g.VendorHash, wantHash)
				}
				if g.DoCheck {
					t.Errorf("doCheck = true, want false: the tests run once, in checks.go-test")
				}
				if g.MainProgram != name {
					t.Errorf("meta.mainProgram = %s, want %s", g.MainProgram, name)
				}
				if !strings.HasPrefix(g.GoVersion, "1.26") {
					t.Errorf("Go %s, want 1.26.x (go.mod's go directive)", g.GoVersion)
				}
				for file, want := range map[string]bool{"go.mod": true, "go.sum": true, "cmd/gbx/main.go": true, "flake.nix": false, "flake.lock": false, "baseimages": false, "nix/go.nix": false, "nix/testdata/nixpkgs/pkgs.nix": true} {
					_, err := os.Stat(filepath.Join(g.Src, file))
					if got := err == nil; got != want {
						t.Errorf("src %s has %s = %v, want %v", g.Src, file, got, want)
					}
				}
			})
		}
		if f.Go["glovebox-kit"].Out == facts["x86_64-linux"].Go["glovebox-kit"].Out && sys != "x86_64-linux" {
			t.Errorf("packages.%s.glovebox-kit is the x86_64-linux derivation", sys)
		}
	}
}

// wantContents are the packages each base adds to the common ones.
var wantContents = map[string][]string{
	"base":    nil,
	"media":   {"ffmpeg-headless", "imagemagick", "sox", "yt-dlp"},
	"docs":    {"pandoc", "qpdf", "pdftk", "poppler-utils", "ghostscript", "libreoffice", "dejavu_fonts", "liberation_ttf", "noto-fonts"},
	"python":  {"uv", "python3-3.13.9-env"},
	"browser": {"chromium", "dejavu_fonts", "liberation_ttf", "noto-fonts", "noto-fonts-cjk-sans", "noto-fonts-color-emoji"},
}

var commonContents = []string{"fake-nss", "bashInteractive", "coreutils", "findutils", "gnugrep", "gnused", "gawk", "curl", "tzdata", "ca-certificates", "usr-bin-env"}

func TestImages(t *testing.T) {
	t.Parallel()
	facts := packageFacts(t)
	wantLayout := []layoutDir{
		{"/work", "0755", uid},
		{"/input", "0755", uid},
		{"/output", "0755", uid},
		{"/var/glovebox", "0755", uid},
		{"/var/glovebox/files", "0755", uid},
		{"/home/glovebox", "0755", uid},
		{"/tmp", "1777", "0:0"},
		{"/etc/glovebox", "0755", "0:0"},
	}
	for sys, f := range facts {
		kit := f.Go["glovebox-kit"].Out
		for base, extra := range wantContents {
			t.Run(sys+"/"+base, func(t *testing.T) {
				b, ok := f.Boxes["box-"+base]
				if !ok {
					t.Fatalf("no packages.%s.box-%s", sys, base)
				}
				c := b.Config
				if b.Function != "dockerTools.streamLayeredImage" {
					t.Errorf("built with %s, want dockerTools.streamLayeredImage", b.Function)
				}
				if b.Name != "glovebox/"+base || b.Tag != "0.1.0" {
					t.Errorf("image %s:%s, want glovebox/%s:0.1.0", b.Name, b.Tag, base)
				}
				if b.Created != epoch || b.Mtime != epoch {
					t.Errorf("created %s mtime %s, want %s for both", b.Created, b.Mtime, epoch)
				}
				if c.User != kitUser || c.WorkingDir != "/work" {
					t.Errorf("User %q WorkingDir %q, want %q /work", c.User, c.WorkingDir, kitUser)
				}
				if diff := cmp.Diff([]string{kit + "/bin/glovebox-kit"}, c.Entrypoint); diff != "" {
					t.Errorf("Entrypoint (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(map[string]struct{}{"8080/tcp": {}}, c.ExposedPorts); diff != "" {
					t.Errorf("ExposedPorts (-want +got):\n%s", diff)
				}
				env := envOf(c.Env)
				for k, want := range map[string]string{
					"GLOVEBOX_MANIFEST": "/etc/glovebox/glovebox.json",
					"GLOVEBOX_BASE":     base,
					"HOME":              "/home/glovebox",
					"PATH":              "/bin:/usr/bin",
					"SSL_CERT_FILE":     "/etc/ssl/certs/ca-bundle.crt",
				} {
					if env[k] != want {
						t.Errorf("Env %s = %q, want %q", k, env[k], want)
					}
				}
				if !strings.HasSuffix(env["TZDIR"], "-tzdata/share/zoneinfo") {
					t.Errorf("Env TZDIR = %q, want tzdata's zoneinfo", env["TZDIR"])
				}
				_, fonts := env["FONTCONFIG_FILE"]
				if want := base == "docs" || base == "browser"; fonts != want {
					t.Errorf("FONTCONFIG_FILE set = %v, want %v", fonts, want)
				}
				if diff := cmp.Diff(wantLayout, b.Glovebox.Layout); diff != "" {
					t.Errorf("layout (-want +got):\n%s", diff)
				}
				for _, d := range wantLayout {
					for _, line := range []string{"mkdir -p '." + d.Path + "'", "chown " + d.Owner + " '." + d.Path + "'", "chmod " + d.Mode + " '." + d.Path + "'"} {
						if !strings.Contains(b.FakeRootCommands, line+"\n") {
							t.Errorf("fakeRootCommands lacks %q:\n%s", line, b.FakeRootCommands)
						}
					}
				}
				// The manifest the image holds is the one the SBOM's build
				// stamped with the closure's provenance (nix/sbom_test.go).
				for _, file := range []string{"glovebox.json", "sbom.cdx.json"} {
					if !strings.Contains(b.FakeRootCommands, "-sbom/"+file+" './etc/glovebox/"+file+"'\n") {
						t.Errorf("fakeRootCommands does not install %s from the SBOM's build:\n%s", file, b.FakeRootCommands)
					}
				}
				if diff := cmp.Diff([]string{"glovebox:x:10001:10001:glovebox:/home/glovebox:/bin/sh"}, b.NSS.Passwd); diff != "" {
					t.Errorf("passwd lines (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff([]string{"glovebox:x:10001:"}, b.NSS.Group); diff != "" {
					t.Errorf("group lines (-want +got):\n%s", diff)
				}
				if b.Contents[0] != "glovebox-kit-0.1.0" {
					t.Errorf("contents[0] = %s, want the kit", b.Contents[0])
				}
				for _, want := range append(slices.Clone(commonContents), extra...) {
					if !slices.Contains(b.Contents, want) {
						t.Errorf("contents lack %s: %v", want, b.Contents)
					}
				}
				for other, pkgs := range wantContents {
					for _, p := range pkgs {
						if other != base && !slices.Contains(extra, p) && slices.Contains(b.Contents, p) {
							t.Errorf("contents have %s from base %s", p, other)
						}
					}
				}
				if slices.Contains(b.Contents, "cacert") {
					t.Errorf("contents have cacert, which collides with dockerTools.caCertificates")
				}
				if base == "python" {
					want := [][]string{{"numpy", "pandas", "pillow", "scipy", "matplotlib"}}
					if diff := cmp.Diff(want, b.Python); diff != "" {
						t.Errorf("python3.withPackages (-want +got):\n%s", diff)
					}
				} else if len(b.Python) != 0 {
					t.Errorf("python3.withPackages %v in base %s", b.Python, base)
				}
				if b.Glovebox.Base != base || b.Glovebox.UID != 10001 || b.Glovebox.ManifestPath != "/etc/glovebox/glovebox.json" {
					t.Errorf("passthru.glovebox base %s uid %d manifest %s", b.Glovebox.Base, b.Glovebox.UID, b.Glovebox.ManifestPath)
				}
				if diff := cmp.Diff(c, b.Glovebox.Config); diff != "" {
					t.Errorf("passthru.glovebox.config differs from the image's (-image +passthru):\n%s", diff)
				}
			})
		}
	}
}

func TestDevShell(t *testing.T) {
	t.Parallel()
	repo(t)
	var got map[string]struct {
		Packages  []string `json:"packages"`
		Hardening []string `json:"hardeningDisable"`
	}
	evalRoot(t, &got, "devShells", `s: builtins.mapAttrs (sys: d: { packages = map (p: p.name) d.default.standIn.args.packages; hardening = d.default.standIn.args.hardeningDisable; }) s`)
	for _, sys := range nixtest.Systems {
		shell := got[sys]
		for _, want := range []string{"go", "gopls", "golangci-lint", "just", "nixfmt", "nodejs_24", "gcc-wrapper"} {
			if !slices.Contains(shell.Packages, want) {
				t.Errorf("devShells.%s.default lacks %s: %v", sys, want, shell.Packages)
			}
		}
	}
}

func TestChecks(t *testing.T) {
	t.Parallel()
	repo(t)
	var got map[string]struct {
		Names      []string `json:"names"`
		CheckPhase string   `json:"checkPhase"`
		DoCheck    bool     `json:"doCheck"`
		Images     string   `json:"images"`
		Src        string   `json:"src"`
	}
	evalRoot(t, &got, "checks", `c: builtins.mapAttrs (sys: s: {
  names = builtins.attrNames s;
  inherit (s.go-test.standIn.args) checkPhase doCheck;
  src = "${s.go-test.standIn.args.src}";
  images = s.images.standIn.args.text;
}) c`)
	for _, sys := range nixtest.Systems {
		c := got[sys]
		if diff := cmp.Diff([]string{"go-test", "images"}, c.Names); diff != "" {
			t.Errorf("checks.%s (-want +got):\n%s", sys, diff)
		}
		if !c.DoCheck || !strings.Contains(c.CheckPhase, "go test ") || !strings.Contains(c.CheckPhase, "go vet ") {
			t.Errorf("checks.%s.go-test does not run go vet and go test (doCheck %v):\n%s", sys, c.DoCheck, c.CheckPhase)
		}
		// The Go tests read the lock and the example manifests.
		for _, file := range []string{"flake.lock", "baseimages/manifests/base.json", "go.mod"} {
			if _, err := os.Stat(filepath.Join(c.Src, file)); err != nil {
				t.Errorf("checks.%s.go-test source lacks %s: %v", sys, file, err)
			}
		}
		var images map[string]struct {
			Base string `json:"base"`
			User string `json:"User"`
		}
		if err := json.Unmarshal([]byte(c.Images), &images); err != nil {
			t.Fatalf("checks.%s.images text: %v", sys, err)
		}
		for base := range wantContents {
			if images[base].Base != base || images[base].User != kitUser {
				t.Errorf("checks.%s.images[%s] = %+v", sys, base, images[base])
			}
		}
	}
}

// TestFlakeCheck runs nix flake check --no-build and rejects every
// warning but the known-harmless ones (nixtest.Warnings): the overridden
// input, and lib, an output Nix 2.8 does not know.
func TestFlakeCheck(t *testing.T) {
	t.Parallel()
	dir := repo(t)
	s := nixtest.StandInNixpkgs(t)
	_, stderr := nixtest.Run(t, "nix", append([]string{"flake", "check", "--no-build", "--offline"}, append(s.OverrideInput("nixpkgs"), "path:"+dir)...)...)
	nixtest.NoWarnings(t, "nix flake check", stderr)
}
