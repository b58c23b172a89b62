package generator

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// view is what the templates see. Every string in it is raw; templates
// escape at the point of use.
type view struct {
	Name, Version, Base string
	// BaseFlake and BaseAttr name a base from another flake: the flake
	// reference and the name under its lib.gloveboxBases.
	BaseFlake, BaseAttr string
	NixpkgsURL          string
	// GloveboxURL is the glovebox input, at the release tag when there is one.
	GloveboxURL string
	NixpkgsRev  string
	// NixPackages are nixpkgs attribute paths for the flake.
	NixPackages []string
	// PythonPackages are python3Packages attribute names.
	PythonPackages []string
	// Pip and Npm are the packages as the author wrote them.
	Pip, Npm []string
	// NpmDir is the directory of the npm lock (package.json and
	// package-lock.json) in dist/, "" without npm packages.
	NpmDir string
	// ImageEnv are environment defaults baked into the images, sorted.
	ImageEnv []kv
	// BuildEnv are nixpacks' variables: the base's environment, then
	// ImageEnv.
	BuildEnv []kv
	// SetupPkgs are nixpacks' setup nixPkgs.
	SetupPkgs []string
	// InstallCmds and BuildCmds are nixpacks shell commands.
	InstallCmds, BuildCmds []string
	// Paths are added to PATH by nixpacks.
	Paths []string
	Dirs  []string
	Port  int
	// FlyApp, FlyRegion ("" for none), FlySize and MemoryMB are fly.toml's.
	FlyApp, FlyRegion, FlySize string
	MemoryMB                   int64
	// KillTimeout is fly.toml's kill_timeout in seconds (FlyKillTimeout).
	KillTimeout int
	// Secrets are the variables to set as platform secrets besides
	// GLOVEBOX_KEY: the declared secrets and required variables without a
	// default.
	Secrets []string
	// StartCmd is the nixpacks start command (also railway.json's).
	StartCmd   string
	KitVersion string
	AgentType  string
	// AgentMain and AgentVendorHash build a Go agent's kit.
	AgentMain, AgentVendorHash string
	// Persist: sessions.persist; the kit's root (GLOVEBOX_ROOT) is then
	// DataDir, where the deploy files mount a volume.
	Persist   bool
	DataDir   string
	FlyVolume string
	warnings  []string
}

// DataDir is where a box whose sessions persist keeps its state and its
// sessions' directories: the kit's root (GLOVEBOX_ROOT), a volume in the
// deploy files.
const DataDir = "/data"

// FlyVolume names the Fly volume a persistent box mounts at DataDir.
const FlyVolume = "glovebox_data"

// persists reports whether c's sessions outlive the kit.
func persists(c *Config) bool { return c.Sessions != nil && c.Sessions.Persist }

type kv struct{ Key, Value string }

// newView is what the templates see of c with opts: the values as they
// are, nixpacks' plan, and the warnings for the author.
func newView(c *Config, opts Options) *view {
	flyKill, flyCapped := FlyKillTimeout(c)
	v := &view{
		Name: c.Name, Version: c.Version, Base: c.Base,
		BaseFlake: c.BaseFlake, BaseAttr: c.BaseAttr,
		NixpkgsURL:      opts.Nixpkgs.url(),
		GloveboxURL:     GloveboxFlake,
		NixpkgsRev:      opts.Nixpkgs.Rev,
		Pip:             c.Packages.Pip,
		Npm:             c.Packages.Npm,
		Port:            Port,
		StartCmd:        nixpacksStartCmd,
		KitVersion:      opts.KitVersion,
		AgentType:       c.Agent.Type,
		AgentMain:       c.AgentMain,
		AgentVendorHash: c.AgentVendorHash,
		KillTimeout:     flyKill,
		Secrets:         platformSecrets(c),
	}
	v.NixPackages, v.PythonPackages = pythonPackages(c.Packages)
	for _, k := range sortedKeys(c.Env) {
		if e := c.Env[k]; e.Default != "" && !e.Secret {
			v.ImageEnv = append(v.ImageEnv, kv{k, e.Default})
		}
	}
	if persists(c) {
		v.Persist, v.DataDir, v.FlyVolume = true, DataDir, FlyVolume
		v.ImageEnv = append(v.ImageEnv, kv{"GLOVEBOX_ROOT", DataDir})
		slices.SortFunc(v.ImageEnv, func(a, b kv) int { return strings.Compare(a.Key, b.Key) })
	}
	for _, k := range sortedKeys(c.FS) {
		p := c.FS[k].Path
		v.Dirs = append(v.Dirs, p)
	}
	v.Dirs = append(v.Dirs, "/var/glovebox/files")
	if opts.KitVersion != "latest" {
		v.GloveboxURL += "/" + opts.KitVersion
	}
	v.nixpacks(c, opts)
	v.warnings = append(v.warnings, viewWarnings(c, opts, flyCapped)...)
	return v
}

// platformSecrets are the variables to set as platform secrets besides
// GLOVEBOX_KEY: the declared secrets and required variables without a
// default, then the storage adapters' credentials not declared.
func platformSecrets(c *Config) []string {
	var secrets []string
	for _, k := range c.EnvOrder {
		if e := c.Env[k]; e.Secret || (e.Required && e.Default == "") {
			secrets = append(secrets, k)
		}
	}
	for _, k := range StorageSecrets(c) {
		if _, declared := c.Env[k]; !declared {
			secrets = append(secrets, k)
		}
	}
	return secrets
}

// pythonPackages splits the packages into nixpkgs attributes and
// python3Packages names. Python libraries go into the image's one Python
// environment: pip names as python3Packages attributes, and
// python3Packages.X listed under packages.nix too (on its own it would be
// a library no interpreter in the image sees).
func pythonPackages(pk protocol.Packages) (nix, python []string) {
	for _, p := range pk.Nix {
		if name, ok := strings.CutPrefix(p, "python3Packages."); ok && !strings.Contains(name, ".") {
			python = append(python, name)
		} else {
			nix = append(nix, p)
		}
	}
	for _, p := range pk.Pip {
		python = append(python, pythonAttr(p))
	}
	return nix, dedup(python)
}

// nixpacks fills in nixpacks' plan: the kit is installed from source with
// Go from the pinned nixpkgs; the base image's packages and the box's come
// from the same nixpkgs, Python packages from pip in a virtual environment.
// Every image has the base's userland, then the chosen base's tools. A
// base from another flake exists only in the Nix image: nixpacks gets the
// common layer and the box's own packages.
func (v *view) nixpacks(c *Config, opts Options) {
	common, base := baseSpecs["base"], baseSpecs[c.Base]
	if c.BaseFlake != "" {
		base = baseSpec{}
		v.warnings = append(v.warnings, fmt.Sprintf(
			"base %q comes from another flake, which nixpacks cannot use: nixpacks.toml installs only the common base packages and the box's own (packages.nix, pip, npm), not that base's; list what the nixpacks build needs under [packages] too (the Nix image, flake.nix and the Dockerfile, has the base)",
			c.Base))
	}
	v.SetupPkgs = dedup(append(append(append([]string{"cacert", GoAttr}, common.Nix...), base.Nix...), v.NixPackages...))
	for _, k := range sortedKeys(base.Env) {
		v.BuildEnv = append(v.BuildEnv, kv{k, base.Env[k]})
	}
	v.BuildEnv = append(v.BuildEnv, v.ImageEnv...)
	v.InstallCmds = []string{"CGO_ENABLED=0 GOBIN=/app/bin go install -trimpath " + shellquote(KitModule+"@"+opts.KitVersion) + " " + shellquote(SupervisorModule+"@"+opts.KitVersion)}
	if len(c.Packages.Npm) > 0 && !hasNode(v.SetupPkgs) {
		v.SetupPkgs = append(v.SetupPkgs, "nodejs_22") // npm ci, and the packages' programs
	}
	if py := dedup(append(append([]string(nil), base.Pip...), v.PythonPackages...)); len(py) > 0 {
		// The same python3.withPackages as the Nix image, not pip in a venv:
		// manylinux wheels need libraries (libstdc++, zlib) a Nix Python
		// does not have.
		v.SetupPkgs = append(slices.DeleteFunc(v.SetupPkgs, func(p string) bool { return p == "python3" }), pythonEnv(py))
	}
	if len(c.Packages.Npm) > 0 {
		// The same lock as the Nix image: npm ci installs exactly it.
		v.InstallCmds = append(v.InstallCmds, "cd /app/"+NpmDir+" && npm ci --no-audit --no-fund")
		v.Paths = append(v.Paths, "/app/"+NpmDir+"/node_modules/.bin")
		v.Npm = nil
		v.NpmDir = NpmDir
	}
	v.BuildCmds = []string{"mkdir -p " + shelljoin(v.Dirs)}
}

// viewWarnings are what the author should know about the deploy files:
// a drain longer than Fly allows, replicas, a development gbx, an agent
// command without its runtime, a Go agent's build context.
func viewWarnings(c *Config, opts Options, flyCapped bool) []string {
	var w []string
	if flyCapped {
		w = append(w, fmt.Sprintf(
			"sessions.drain gives the box %d s from SIGTERM to SIGKILL, but Fly accepts a kill_timeout of at most %d s: on Fly, prompts still running %d s into a drain are killed (Kubernetes' terminationGracePeriodSeconds is the full %d s); keep sessions.drain at %ds or less for Fly",
			KillTimeout(c), maxFlyKillTimeout, maxFlyKillTimeout-drainMargin, KillTimeout(c), maxFlyKillTimeout-drainMargin))
	}
	if n := c.Deploy.Kubernetes.Replicas; n > 1 {
		w = append(w, fmt.Sprintf(
			"[deploy.kubernetes] replicas = %d: a session and its files live on one pod, and the Service keeps a client on one pod by its IP address only (behind a proxy or ingress every client may share one IP, or one client change pods); for many users prefer agent-sandbox.json, one sandbox per user or session (docs/kubernetes.md)", n))
	}
	if opts.KitVersion == "latest" {
		w = append(w, "this gbx is a development build, not a release: flake.nix takes glovebox from its default branch and nixpacks installs the kit @latest, so deploys float; generate with a released gbx (go install github.com/glovebox-dev/glovebox/cmd/gbx@vX.Y.Z) to pin both")
	}
	if c.Agent.Type == protocol.AgentACP && len(c.Agent.Command) > 0 {
		switch filepath.Base(c.Agent.Command[0]) {
		case "npx", "node", "npm":
			if !hasNode(c.Packages.Nix) {
				w = append(w, fmt.Sprintf("agent.command runs %s, but no Node.js is listed: add \"nodejs_22\" to packages.nix", c.Agent.Command[0]))
			}
		}
	}
	if c.Agent.Type == protocol.AgentGo {
		w = append(w, fmt.Sprintf("agent type \"go\": flake.nix and the Dockerfile build %s from the box directory (dist/ and its parent): build the Dockerfile with the box directory as context (docker build -f dist/Dockerfile ., fly deploy --config dist/fly.toml --dockerfile dist/Dockerfile . from there); nixpacks.toml cannot build it and runs the stock kit, so keep railway.json's Dockerfile builder, with the box directory as the Railway service's Root Directory (docs/deploy.md)", c.AgentMain))
	}
	return w
}

// dedup drops repeated strings, keeping the first.
func dedup(ss []string) []string {
	return dedupBy(ss, func(s string) string { return s })
}

// dedupBy drops strings whose key repeats an earlier one's.
func dedupBy(ss []string, key func(string) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if k := key(s); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

func hasNode(pkgs []string) bool {
	for _, p := range pkgs {
		if p == "nodejs" || strings.HasPrefix(p, "nodejs_") {
			return true
		}
	}
	return false
}

var pipSepRE = regexp.MustCompile(`[-_.]+`)

// pythonAttr is the python3Packages attribute for a pip name, normalised
// as PEP 503 and nixpkgs do: lower case, separators as "-".
func pythonAttr(pip string) string {
	return pipSepRE.ReplaceAllString(strings.ToLower(pip), "-")
}
