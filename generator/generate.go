package generator

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Port is the port the kit listens on in every image.
const Port = protocol.DefaultPort

// KitModule is the Go package of the kit binary, installed by nixpacks.
const KitModule = "github.com/glovebox-dev/glovebox/cmd/glovebox-kit"

// SupervisorModule is the Go package of the kit's sandbox supervisor,
// installed by nixpacks beside the kit (the kit uses it from there).
const SupervisorModule = "github.com/glovebox-dev/glovebox/cmd/glovebox-sandbox"

// GloveboxFlake is the glovebox flake generated flakes take mkBox from.
const GloveboxFlake = "github:glovebox-dev/glovebox"

// GoAttr is the nixpkgs Go that builds the kit: nix/go.nix's, which
// nixpacks uses too (a test holds them equal).
const GoAttr = "go_1_26"

// Names of the files Generate returns.
const (
	FlakeFile      = "flake.nix"
	LockFile       = "flake.lock"
	NixpacksFile   = "nixpacks.toml"
	ManifestFile   = "glovebox.json"
	KeyFile        = "glovebox.key"
	EnvExampleFile = ".env.example"
	FlyFile        = "fly.toml"
	DockerFile     = "Dockerfile"
	GitignoreFile  = ".gitignore"
	IgnoreFile     = ".dockerignore"
)

// File is one generated file.
type File struct {
	Name string // a base name inside the output directory
	Data []byte
	Mode fs.FileMode
}

// Options are the inputs of Generate besides the config.
type Options struct {
	// Key is the box key. Only its fingerprint enters the manifest; it is
	// written to glovebox.key.
	Key string
	// Fingerprint stands in for Key when there is none (a check on a
	// checkout without the git-ignored key): the manifest names it, and no
	// glovebox.key is produced.
	Fingerprint string
	// RunsPublicKey stands in for the run records' public key, derived
	// from Key, when there is no Key, as Fingerprint does.
	RunsPublicKey string
	// Nixpkgs is the nixpkgs pin; zero means the verified pin of
	// DefaultBranch. Tests pass the stand-in's narHash here.
	Nixpkgs Pin
	// Glovebox, when set, locks the glovebox input too (a release pin).
	// Otherwise the lock leaves it out and the first networked `nix flake
	// lock` adds it.
	Glovebox *Pin
	// KitVersion is the glovebox release of the gbx that generates, such as
	// "v1.2.3": the flake's glovebox input names that tag, and nixpacks
	// installs that kit. "latest" (or empty), for a development build of
	// gbx, leaves both floating and warns.
	KitVersion string
	// PreviousLock is the flake.lock already in the output directory, if
	// any. When Glovebox is nil, its glovebox input (the node and the nodes
	// it reaches) is kept, so a lock completed by `nix flake lock` survives
	// the next generate.
	PreviousLock []byte
	// NpmLock is the package-lock.json of the config's npm packages
	// (ResolveNpm): written to dist/npm with their package.json, which the
	// Nix image and nixpacks install from. Required when the config lists
	// npm packages; it must be a lock for exactly those (CheckNpmLock).
	NpmLock []byte
	// PreviousFly is the fly.toml already in the output directory, if any:
	// its app and primary_region (what `fly launch` wrote) are kept when
	// [deploy.fly] does not set them.
	PreviousFly []byte
}

// Result is what Generate produces.
type Result struct {
	Files []File
	// Warnings are things the author should know, one line each.
	Warnings []string
}

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("").Option("missingkey=error").Funcs(template.FuncMap{
	"nixstr":     nixstr,
	"nixlist":    nixlist,
	"nixkey":     nixkey,
	"tomlstr":    tomlstr,
	"tomlkey":    quoteKey,
	"tomllist":   tomllist,
	"shellquote": shellquote,
	"shelljoin":  shelljoin,
	"jsonstr":    jsonstr,
	"comment":    comment,
}).ParseFS(templateFS, "templates/*.tmpl"))

var kitVersionRE = regexp.MustCompile(`^(latest|v[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.-]+)?)$`)

// Generate renders every artefact of the box. It is a pure function: the
// same config and options give the same bytes on any machine.
func Generate(c *Config, opts Options) (*Result, error) {
	if c == nil {
		return nil, errors.New("generate: no config")
	}
	key, fingerprint := strings.TrimSpace(opts.Key), opts.Fingerprint
	switch {
	case key != "":
		if err := CheckKey(key); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		fingerprint = protocol.Fingerprint(key)
	case fingerprint == "":
		return nil, errors.New("generate: no box key")
	}
	if opts.Nixpkgs == (Pin{}) {
		opts.Nixpkgs = pins[DefaultBranch]
	}
	if err := opts.Nixpkgs.check("nixpkgs"); err != nil {
		return nil, err
	}
	if opts.Glovebox != nil {
		if err := opts.Glovebox.check("glovebox"); err != nil {
			return nil, err
		}
	}
	if opts.KitVersion == "" {
		opts.KitVersion = "latest"
	}
	if !kitVersionRE.MatchString(opts.KitVersion) {
		return nil, fmt.Errorf("generate: kit version %q is not \"latest\" or a release such as v1.2.3", opts.KitVersion)
	}
	if g := opts.Glovebox; g != nil && opts.KitVersion != "latest" && g.Ref != opts.KitVersion {
		// The lock's original must name what flake.nix names: the tag.
		pin := *g
		pin.Ref = opts.KitVersion
		opts.Glovebox = &pin
	}

	m := c.Manifest(fingerprint)
	m.Runs = runsSpec(m.Runs, key, opts.RunsPublicKey)
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("generate: manifest: %w", err)
	}
	manifest, err := marshalJSON(m)
	if err != nil {
		return nil, fmt.Errorf("generate: manifest: %w", err)
	}
	keptLabel, kept := keptInput(opts.PreviousLock, "glovebox")
	var baseLabel string
	var baseNodes map[string]json.RawMessage
	if c.BaseFlake != "" {
		baseLabel, baseNodes = keptInput(opts.PreviousLock, "base")
	}
	lock, err := marshalJSON(lockFile(opts, keptLabel, kept, baseLabel, baseNodes))
	if err != nil {
		return nil, fmt.Errorf("generate: flake.lock: %w", err)
	}

	npmManifest := NpmManifest(c)
	if npmManifest != nil {
		if opts.NpmLock == nil {
			return nil, fmt.Errorf("generate: %w: [packages] npm lists %s and there is no %s; `gbx generate` makes it with npm from the registry", ErrNpmUnresolved, strings.Join(c.Packages.Npm, ", "), NpmLockFile)
		}
		if err := CheckNpmLock(c, opts.NpmLock); err != nil {
			return nil, fmt.Errorf("generate: %w: %v; run `gbx generate` (with network) to lock them again", ErrNpmUnresolved, err)
		}
	}
	v := newView(c, opts)
	vm, err := flyMachine(c)
	if err != nil {
		return nil, fmt.Errorf("generate: fly.toml: %w", err)
	}
	v.FlySize, v.MemoryMB = vm.Size, vm.MemoryMB
	keptApp, keptRegion := keptFly(opts.PreviousFly)
	v.FlyApp = cmp.Or(c.Deploy.Fly.App, keptApp, c.Name)
	v.FlyRegion = cmp.Or(c.Deploy.Fly.Region, keptRegion)
	kube, err := marshalJSON(kubernetes(c))
	if err != nil {
		return nil, fmt.Errorf("generate: %s: %w", KubernetesFile, err)
	}
	sandboxes, err := marshalJSON(agentSandbox(c))
	if err != nil {
		return nil, fmt.Errorf("generate: %s: %w", AgentSandboxFile, err)
	}
	railway, err := marshalJSON(railwayConfig(c))
	if err != nil {
		return nil, fmt.Errorf("generate: %s: %w", RailwayFile, err)
	}
	res := &Result{Warnings: append(slices.Clip(c.Warnings), v.warnings...)}
	add := func(name string, data []byte, mode fs.FileMode) {
		res.Files = append(res.Files, File{Name: name, Data: data, Mode: mode})
	}
	for _, t := range []struct{ file, tmpl string }{
		{FlakeFile, "flake.nix.tmpl"},
		{NixpacksFile, "nixpacks.toml.tmpl"},
		{FlyFile, "fly.toml.tmpl"},
		{DockerFile, "Dockerfile.tmpl"},
		{GitignoreFile, "gitignore.tmpl"},
		{IgnoreFile, "dockerignore.tmpl"},
	} {
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, t.tmpl, v); err != nil {
			return nil, fmt.Errorf("generate: %s: %w", t.file, err)
		}
		add(t.file, b.Bytes(), 0o644)
	}
	add(LockFile, lock, 0o644)
	add(RailwayFile, railway, 0o644)
	add(KubernetesFile, kube, 0o644)
	add(AgentSandboxFile, sandboxes, 0o644)
	if c.AgentMain != "" {
		// The Dockerfile's context is then the box directory: BuildKit reads
		// the ignore file named after the Dockerfile.
		add(DockerFile+".dockerignore", []byte("# Generated by `gbx generate`: the box key and local state stay out of the\n# build context (the box directory).\ndist/glovebox.key\n.env\n.glovebox/\nresult*\n"), 0o644)
	}
	if npmManifest != nil {
		add(NpmPackageFile, npmManifest, 0o644)
		add(NpmLockFile, opts.NpmLock, 0o644)
	}
	add(ManifestFile, manifest, 0o644)
	add(EnvExampleFile, envExample(c), 0o644)
	if key != "" {
		add(KeyFile, []byte(key+"\n"), 0o600)
	}
	slices.SortFunc(res.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return res, nil
}

// marshalJSON is JSON as Nix and v1 write it: 2-space indent, map keys
// sorted, no HTML escaping, a trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// lockFile is the flake.lock (version 7) of the generated flake. nixpkgs is
// locked to the pin; glovebox to the release pin when there is one, else to
// what a previous lock held, else it is left for the first networked lock.
// A base from another flake is kept from the previous lock when it holds
// one, else it is left for the first networked lock too.
func lockFile(opts Options, keptLabel string, kept map[string]json.RawMessage, baseLabel string, baseNodes map[string]json.RawMessage) map[string]any {
	nodes := map[string]any{"nixpkgs": opts.Nixpkgs.lockNode()}
	rootInputs := map[string]any{"nixpkgs": "nixpkgs"}
	switch {
	case opts.Glovebox != nil:
		g := opts.Glovebox.lockNode()
		g["inputs"] = map[string]any{"nixpkgs": []string{"nixpkgs"}}
		nodes["glovebox"] = g
		rootInputs["glovebox"] = "glovebox"
	case kept != nil:
		for label, n := range kept {
			nodes[label] = n
		}
		rootInputs["glovebox"] = keptLabel
	}
	if baseNodes != nil {
		for label, n := range baseNodes {
			if _, clash := nodes[label]; !clash {
				nodes[label] = n
			}
		}
		rootInputs["base"] = baseLabel
	}
	nodes["root"] = map[string]any{"inputs": rootInputs}
	return map[string]any{"nodes": nodes, "root": "root", "version": 7}
}

// keptInput returns the label of the node a previous lock gives the root
// input named input, and the nodes it reaches, by label. It returns no
// nodes when the lock is absent, unreadable, of another version, or its
// nodes would clash with ours.
func keptInput(prev []byte, input string) (string, map[string]json.RawMessage) {
	if len(prev) == 0 {
		return "", nil
	}
	var l struct {
		Nodes   map[string]json.RawMessage `json:"nodes"`
		Root    string                     `json:"root"`
		Version int                        `json:"version"`
	}
	if json.Unmarshal(prev, &l) != nil || l.Version != 7 {
		return "", nil
	}
	inputsOf := func(label string) map[string]json.RawMessage {
		var n struct {
			Inputs map[string]json.RawMessage `json:"inputs"`
		}
		if json.Unmarshal(l.Nodes[label], &n) != nil {
			return nil
		}
		return n.Inputs
	}
	var start string
	if json.Unmarshal(inputsOf(l.Root)[input], &start) != nil || start == "" {
		return "", nil // absent, or a follows path
	}
	kept := map[string]json.RawMessage{}
	queue := []string{start}
	for len(queue) > 0 {
		label := queue[0]
		queue = queue[1:]
		if _, seen := kept[label]; seen {
			continue
		}
		n, ok := l.Nodes[label]
		if !ok || label == "nixpkgs" || label == "root" || label == l.Root {
			return "", nil
		}
		kept[label] = n
		for _, in := range inputsOf(label) {
			var next string
			if json.Unmarshal(in, &next) == nil { // a label; follows paths are arrays
				queue = append(queue, next)
			}
		}
	}
	return start, kept
}

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
	warnings                   []string
}

type kv struct{ Key, Value string }

func newView(c *Config, opts Options) *view {
	flyKill, flyCapped := FlyKillTimeout(c)
	v := &view{
		Name: c.Name, Version: c.Version, Base: c.Base,
		BaseFlake: c.BaseFlake, BaseAttr: c.BaseAttr,
		NixpkgsURL:      opts.Nixpkgs.url(),
		GloveboxURL:     GloveboxFlake,
		NixpkgsRev:      opts.Nixpkgs.Rev,
		NixPackages:     c.Packages.Nix,
		Pip:             c.Packages.Pip,
		Npm:             c.Packages.Npm,
		Port:            Port,
		StartCmd:        nixpacksStartCmd,
		KitVersion:      opts.KitVersion,
		AgentType:       c.Agent.Type,
		AgentMain:       c.AgentMain,
		AgentVendorHash: c.AgentVendorHash,
		KillTimeout:     flyKill,
	}
	for _, k := range c.EnvOrder {
		if e := c.Env[k]; e.Secret || (e.Required && e.Default == "") {
			v.Secrets = append(v.Secrets, k)
		}
	}
	for _, k := range StorageSecrets(c) {
		if _, declared := c.Env[k]; !declared {
			v.Secrets = append(v.Secrets, k)
		}
	}
	// Python libraries go into the image's one Python environment: pip
	// names as python3Packages attributes, and python3Packages.X listed
	// under packages.nix too (on its own it would be a library no
	// interpreter in the image sees).
	v.NixPackages = nil
	for _, p := range c.Packages.Nix {
		if name, ok := strings.CutPrefix(p, "python3Packages."); ok && !strings.Contains(name, ".") {
			v.PythonPackages = append(v.PythonPackages, name)
		} else {
			v.NixPackages = append(v.NixPackages, p)
		}
	}
	for _, p := range c.Packages.Pip {
		v.PythonPackages = append(v.PythonPackages, pythonAttr(p))
	}
	v.PythonPackages = dedup(v.PythonPackages)
	for _, k := range sortedKeys(c.Env) {
		if e := c.Env[k]; e.Default != "" && !e.Secret {
			v.ImageEnv = append(v.ImageEnv, kv{k, e.Default})
		}
	}
	for _, k := range sortedKeys(c.FS) {
		p := c.FS[k].Path
		v.Dirs = append(v.Dirs, p)
	}
	v.Dirs = append(v.Dirs, "/var/glovebox/files")

	// nixpacks: the kit is installed from source with Go from the pinned
	// nixpkgs; the base image's packages and the box's come from the same
	// nixpkgs, Python packages from pip in a virtual environment.
	// Every image has the base's userland, then the chosen base's tools.
	// A base from another flake exists only in the Nix image: nixpacks
	// gets the common layer and the box's own packages.
	common, base := baseSpecs["base"], baseSpecs[c.Base]
	if c.BaseFlake != "" {
		base = baseSpec{}
		v.warnings = append(v.warnings, fmt.Sprintf(
			"base %q comes from another flake, which nixpacks cannot use: nixpacks.toml installs only the common base packages and the box's own (packages.nix, pip, npm), not that base's; list what the nixpacks build needs under [packages] too (the Nix image, flake.nix and the Dockerfile, has the base)",
			c.Base))
	}
	if flyCapped {
		v.warnings = append(v.warnings, fmt.Sprintf(
			"sessions.drain gives the box %d s from SIGTERM to SIGKILL, but Fly accepts a kill_timeout of at most %d s: on Fly, prompts still running %d s into a drain are killed (Kubernetes' terminationGracePeriodSeconds is the full %d s); keep sessions.drain at %ds or less for Fly",
			KillTimeout(c), maxFlyKillTimeout, maxFlyKillTimeout-drainMargin, KillTimeout(c), maxFlyKillTimeout-drainMargin))
	}
	if n := c.Deploy.Kubernetes.Replicas; n > 1 {
		v.warnings = append(v.warnings, fmt.Sprintf(
			"[deploy.kubernetes] replicas = %d: a session and its files live on one pod, and the Service keeps a client on one pod by its IP address only (behind a proxy or ingress every client may share one IP, or one client change pods); for many users prefer agent-sandbox.json, one sandbox per user or session (docs/kubernetes.md)", n))
	}
	if opts.KitVersion != "latest" {
		v.GloveboxURL += "/" + opts.KitVersion
	} else {
		v.warnings = append(v.warnings, "this gbx is a development build, not a release: flake.nix takes glovebox from its default branch and nixpacks installs the kit @latest, so deploys float; generate with a released gbx (go install github.com/glovebox-dev/glovebox/cmd/gbx@vX.Y.Z) to pin both")
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
	if c.Agent.Type == protocol.AgentACP && len(c.Agent.Command) > 0 {
		switch filepath.Base(c.Agent.Command[0]) {
		case "npx", "node", "npm":
			if !hasNode(c.Packages.Nix) {
				v.warnings = append(v.warnings, fmt.Sprintf("agent.command runs %s, but no Node.js is listed: add \"nodejs_22\" to packages.nix", c.Agent.Command[0]))
			}
		}
	}
	if c.Agent.Type == protocol.AgentGo {
		v.warnings = append(v.warnings, fmt.Sprintf("agent type \"go\": flake.nix and the Dockerfile build %s from the box directory (dist/ and its parent): build the Dockerfile with the box directory as context (docker build -f dist/Dockerfile ., fly deploy --config dist/fly.toml --dockerfile dist/Dockerfile . from there); nixpacks.toml cannot build it and runs the stock kit, so keep railway.json's Dockerfile builder, with the box directory as the Railway service's Root Directory (docs/deploy.md)", c.AgentMain))
	}
	return v
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

// s3Secrets are the credentials the kit needs at boot when the storage
// policy uses s3.
var s3Secrets = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}

// StorageSecrets are the variables the storage policy needs set on the
// platform besides [env]'s: the S3 credentials when a rule uses s3 (the
// kit refuses to boot without them).
func StorageSecrets(c *Config) []string {
	for _, p := range []protocol.Policy{c.Storage.Inputs, c.Storage.Outputs} {
		for _, r := range p.Rules {
			if r.Use.Adapter == protocol.AdapterS3 {
				return s3Secrets
			}
		}
	}
	return nil
}

// envExample renders .env.example in v1's format.
func envExample(c *Config) []byte {
	var b strings.Builder
	b.WriteString("# Auth key for the glovebox server (generated by `gbx generate`: the contents of glovebox.key)\n")
	b.WriteString("GLOVEBOX_KEY=\n\n")
	b.WriteString("# Optional: override the listening port (default: $PORT, else 8080)\n")
	b.WriteString("# GLOVEBOX_PORT=8080\n\n")
	b.WriteString("# The box's public base URL, for the links of server-parked outputs\n")
	b.WriteString("# (default http://localhost:<port>): set it behind a public host name\n")
	b.WriteString("# GLOVEBOX_PUBLIC_URL=https://box.example.com\n")
	if s3 := StorageSecrets(c); len(s3) > 0 {
		b.WriteString("\n# S3 credentials for the storage policy's s3 rules: the kit does not boot without them\n")
		for _, k := range s3 {
			if _, declared := c.Env[k]; !declared {
				b.WriteString(k + "=\n")
			}
		}
		b.WriteString("# Optional: a session token, the region, another S3 endpoint (MinIO, R2, Google Cloud Storage)\n")
		b.WriteString("# AWS_SESSION_TOKEN=\n# AWS_REGION=us-east-1\n# AWS_ENDPOINT_URL_S3=https://storage.googleapis.com\n")
	}
	if len(c.EnvOrder) > 0 {
		b.WriteString("\n")
	}
	for _, name := range c.EnvOrder {
		e := c.Env[name]
		if e.Description != "" {
			b.WriteString("# " + comment(e.Description) + "\n")
		}
		if e.Required {
			b.WriteString("# (required)\n")
		}
		if e.Secret {
			b.WriteString("# (secret)\n")
		}
		val := ""
		if e.Default != "" {
			val = envvalue(e.Default)
		}
		b.WriteString(name + "=" + val + "\n\n")
	}
	out := b.String()
	if len(c.EnvOrder) > 0 {
		out = strings.TrimSuffix(out, "\n")
	}
	return []byte(out)
}

// pythonEnv is a nixpacks nixPkgs entry (nixpacks writes entries into its
// Nix expression as they are) for one Python with the python3Packages
// named, as mkBox builds it.
func pythonEnv(names []string) string {
	var b strings.Builder
	b.WriteString("(python3.withPackages (ps: [")
	for _, n := range names {
		b.WriteString(" ps." + nixstr(n))
	}
	b.WriteString(" ]))")
	return b.String()
}

// runsSpec is the manifest's runs block: the config's settings and the
// public key of the box's run records (protocol.RunPublicKey of key, or
// the one given for it), so that whoever holds the manifest verifies
// them. Nil when there is neither.
func runsSpec(c *protocol.RunsSpec, key, public string) *protocol.RunsSpec {
	r := protocol.RunsSpec{PublicKey: public}
	if c != nil {
		r.RecordText = c.RecordText
	}
	if key != "" {
		r.PublicKey = protocol.RunPublicKey(key)
	}
	if r == (protocol.RunsSpec{}) {
		return nil
	}
	return &r
}
