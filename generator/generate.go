package generator

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	key, fingerprint, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	m := c.Manifest(fingerprint)
	m.Provenance = provenance(c, opts) // provenance.go
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
	v, err := templateView(c, opts)
	if err != nil {
		return nil, err
	}
	deploy, err := deployFiles(c)
	if err != nil {
		return nil, err
	}
	res := &Result{Warnings: append(slices.Clip(c.Warnings), v.warnings...)}
	add := func(name string, data []byte, mode fs.FileMode) {
		res.Files = append(res.Files, File{Name: name, Data: data, Mode: mode})
	}
	if err := renderTemplates(v, add); err != nil {
		return nil, err
	}
	add(LockFile, lock, 0o644)
	res.Files = append(res.Files, deploy...)
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

// resolve checks the options and fills in their defaults: the key's
// fingerprint, the nixpkgs pin, the kit version, and a glovebox pin
// renamed to the kit's release tag. It returns the key, trimmed, and the
// fingerprint the manifest names.
func (opts *Options) resolve() (key, fingerprint string, err error) {
	key, fingerprint = strings.TrimSpace(opts.Key), opts.Fingerprint
	switch {
	case key != "":
		if err := CheckKey(key); err != nil {
			return "", "", fmt.Errorf("generate: %w", err)
		}
		fingerprint = protocol.Fingerprint(key)
	case fingerprint == "":
		return "", "", errors.New("generate: no box key")
	}
	if opts.Nixpkgs == (Pin{}) {
		opts.Nixpkgs = pins[DefaultBranch]
	}
	if err := opts.Nixpkgs.check("nixpkgs"); err != nil {
		return "", "", err
	}
	if opts.Glovebox != nil {
		if err := opts.Glovebox.check("glovebox"); err != nil {
			return "", "", err
		}
	}
	if opts.KitVersion == "" {
		opts.KitVersion = "latest"
	}
	if !kitVersionRE.MatchString(opts.KitVersion) {
		return "", "", fmt.Errorf("generate: kit version %q is not \"latest\" or a release such as v1.2.3", opts.KitVersion)
	}
	if g := opts.Glovebox; g != nil && opts.KitVersion != "latest" && g.Ref != opts.KitVersion {
		// The lock's original must name what flake.nix names: the tag.
		pin := *g
		pin.Ref = opts.KitVersion
		opts.Glovebox = &pin
	}
	return key, fingerprint, nil
}

// templateView is what the templates see, with the Fly machine, app and
// region settled.
func templateView(c *Config, opts Options) (*view, error) {
	v := newView(c, opts)
	vm, err := flyMachine(c)
	if err != nil {
		return nil, fmt.Errorf("generate: fly.toml: %w", err)
	}
	v.FlySize, v.MemoryMB = vm.Size, vm.MemoryMB
	keptApp, keptRegion := keptFly(opts.PreviousFly)
	v.FlyApp = cmp.Or(c.Deploy.Fly.App, keptApp, c.Name)
	v.FlyRegion = cmp.Or(c.Deploy.Fly.Region, keptRegion)
	return v, nil
}

// deployFiles are the platforms' JSON files: kubernetes.json,
// agent-sandbox.json and railway.json.
func deployFiles(c *Config) ([]File, error) {
	var files []File
	for _, f := range []struct {
		name string
		doc  func(*Config) map[string]any
	}{{KubernetesFile, kubernetes}, {AgentSandboxFile, agentSandbox}, {RailwayFile, railwayConfig}} {
		data, err := marshalJSON(f.doc(c))
		if err != nil {
			return nil, fmt.Errorf("generate: %s: %w", f.name, err)
		}
		files = append(files, File{Name: f.name, Data: data, Mode: 0o644})
	}
	return files, nil
}

// renderTemplates executes each file's template with v and adds it.
func renderTemplates(v *view, add func(name string, data []byte, mode fs.FileMode)) error {
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
			return fmt.Errorf("generate: %s: %w", t.file, err)
		}
		add(t.file, b.Bytes(), 0o644)
	}
	return nil
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
