package generator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// ConfigFile is the name of the box config in a box directory.
const ConfigFile = "glovebox.toml"

// Bases are the base images a box may start from, in the order the docs
// list them.
var Bases = []string{"base", "media", "docs", "python", "browser"}

// imageEnv are variables the image and the kit set for every session,
// which [env] may not declare (a default would replace the image's), and
// why.
var imageEnv = map[string]string{
	"PATH":            "the image sets it to its packages' bin directories, and a session's PATH is the image's: list programs under [packages] instead",
	"HOME":            "each session gets a home directory of its own from the kit",
	"PWD":             "the kit starts each session in its own directory",
	"USER":            "the kit names each session's user",
	"LOGNAME":         "the kit names each session's user",
	"SHELL":           "the image's shell is the kit's to set",
	"LD_PRELOAD":      "it would load into the kit and every session's programs: build what you need into the image with [packages]",
	"LD_LIBRARY_PATH": "the image's programs find their libraries through the Nix store: list libraries under [packages] instead",
}

// Config is a decoded, checked glovebox.toml.
type Config struct {
	// Dir is the directory the config was loaded from ("" for Parse).
	Dir string
	// SHA256 is the sha256 (hex) of the config file's bytes, which the
	// manifest's provenance names.
	SHA256 string
	// File is the config's name as given, used in messages.
	File string

	Name    string
	Version string
	// Base is one of Bases, without v1's "glovebox/" prefix, or a base
	// from another flake as written ("github:acme/glovebox-bases#ml").
	Base string
	// BaseFlake and BaseAttr are set for a base from another flake: the
	// flake reference and the name under its lib.gloveboxBases.
	BaseFlake string
	BaseAttr  string
	Packages  protocol.Packages
	// Env holds the declared variables; EnvOrder their names in the order
	// the file declares them (v1 writes .env.example in that order).
	Env      map[string]protocol.EnvSpec
	EnvOrder []string
	Storage  protocol.StoragePolicy
	Limits   protocol.Limits
	FS       map[string]protocol.Mount
	Sessions *protocol.SessionsSpec
	// Files is [files]: how /files serves parked files.
	Files *protocol.FilesSpec
	Agent protocol.AgentSpec
	// AgentMain is a Go agent's main package ("./cmd/myagent"), relative
	// to the box directory, which holds its Go module; AgentVendorHash is
	// buildGoModule's vendorHash for it ("" for null).
	AgentMain, AgentVendorHash string
	// Deploy holds the per-platform settings of [deploy].
	Deploy Deploy
	// Sandbox chooses the isolation layers ([sandbox]); nil when the file
	// has none (every layer the platform allows).
	Sandbox *protocol.SandboxSpec
	// Network is the egress policy ([network]); nil when the file has none.
	Network *protocol.NetworkSpec
	// Inspect turns on the kit's inspector ([inspect] enabled = true).
	Inspect *protocol.InspectSpec
	// Inputs holds the operator's switches for url inputs ([inputs]); nil
	// when the file has none.
	Inputs *protocol.InputsSpec
	// HTTP tunes the box's HTTP routes for browsers ([http]); nil when the
	// file has none.
	HTTP *protocol.HTTPSpec
	// Preview serves sessions' preview ports under a wildcard domain
	// ([preview] domain, http); nil when the file has none.
	Preview *protocol.PreviewSpec
	// Snapshots is [snapshots]: where snapshots go and their quotas.
	Snapshots *protocol.SnapshotsSpec
	// Runs holds the run records' settings ([runs] record_text); nil when
	// the file has none. Generate adds the public key.
	Runs *protocol.RunsSpec
	// Warnings are what the file may have wrong but the checks cannot
	// decide (a package name near a known one), "file:line: key: text"
	// each; Generate reports them first.
	Warnings []string
}

// Load reads and checks dir/glovebox.toml. Every problem is reported, each
// with its file and line, in a *ConfigError.
func Load(dir string) (*Config, error) {
	file := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no %s in %s: run `gbx init` to create one", ConfigFile, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	c.Dir = dir
	return c, nil
}

// Manifest returns the box's glovebox.json for a key with the given
// fingerprint: v1's fields plus the additive agent and sessions.
func (c *Config) Manifest(fingerprint string) *protocol.Manifest {
	agent := c.Agent
	base := "glovebox/" + c.Base
	if c.BaseFlake != "" {
		base = c.Base
	}
	return &protocol.Manifest{
		Name:            c.Name,
		Version:         c.Version,
		Base:            base,
		FS:              c.FS,
		Env:             c.Env,
		Limits:          c.Limits,
		KeyFingerprint:  fingerprint,
		StoragePolicy:   c.Storage,
		Packages:        c.Packages,
		ProtocolVersion: protocol.Version,
		Agent:           &agent,
		Sessions:        c.Sessions,
		Network:         c.Network,
		Sandbox:         c.Sandbox,
		Files:           c.Files,
		Inspect:         c.Inspect,
		Inputs:          c.Inputs,
		HTTP:            c.HTTP,
		Runs:            c.Runs,
		Preview:         c.Preview,
		Snapshots:       c.Snapshots,
	}
}

var (
	versionRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	nixAttrRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_'-]*(\.[A-Za-z_][A-Za-z0-9_'-]*)*$`)
	pipRE     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	npmRE     = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9.^~*<>=|-]+)?$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	mountRE   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	adapterRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	cpuRE     = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// Parse decodes and checks a glovebox.toml held in data; file names it in
// messages.
func Parse(file string, data []byte) (*Config, error) {
	d, err := parseDoc(file, data)
	if err != nil {
		return nil, err
	}
	c := defaultConfig(file, data)
	d.applyPreset()
	root, _ := d.table("", d.root, "name", "version", "base", "packages", "env", "storage", "limits", "fs", "sessions", "agent", "deploy", "network", "sandbox", "files", "inspect", "inputs", "http", "runs", "preview", "snapshots")
	for _, k := range sortedKeys(root) {
		d.section(k, root[k], c)
	}
	if len(d.probs) == 0 {
		d.acrossTables(c)
	}
	d.injectReachable(c)
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// defaultConfig is what a glovebox.toml (named file, held in data) that
// sets nothing configures; Parse fills in what it sets.
func defaultConfig(file string, data []byte) *Config {
	return &Config{
		SHA256:  configDigest(data),
		File:    file,
		Name:    "glovebox-app",
		Version: "0.1.0",
		Base:    "base",
		Env:     map[string]protocol.EnvSpec{},
		Storage: protocol.StoragePolicy{Inputs: protocol.DefaultInputsPolicy(), Outputs: protocol.DefaultOutputsPolicy()},
		FS:      protocol.DefaultFS(),
		Agent:   protocol.AgentSpec{Type: protocol.AgentExec},
		Deploy:  Deploy{Railway: Railway{Builder: BuilderDockerfile}, Kubernetes: Kubernetes{PodSecurity: PodBaseline}},
	}
}

// section decodes the top-level key k, whose value is v, into c.
func (d *doc) section(k string, v any, c *Config) {
	switch k {
	case "name":
		if s, ok := d.str(k, v); ok {
			if !protocol.NameRE.MatchString(s) {
				d.errorf(k, "%q is not a valid box name: use 1 to 63 lowercase letters, digits and -, starting with a letter or digit (it becomes an image name and a host name)", s)
			}
			c.Name = s
		}
	case "version":
		if s, ok := d.str(k, v); ok {
			if !versionRE.MatchString(s) {
				d.errorf(k, "%q is not a valid version: use letters, digits, '.', '_' and '-' (it becomes the image tag), e.g. \"0.1.0\"", s)
			}
			c.Version = s
		}
	case "base":
		d.base(k, v, c)
	case "packages":
		d.packages(k, v, c)
	case "env":
		d.env(k, v, c)
	case "storage":
		d.storage(k, v, c)
	case "limits":
		d.limits(k, v, c)
	case "fs":
		d.fs(k, v, c)
	case "sessions":
		d.sessions(k, v, c)
	case "agent":
		d.agent(k, v, c)
	case "network":
		d.network(k, v, c)
	case "deploy":
		d.deploy(k, v, c)
	case "sandbox":
		d.sandbox(k, v, c)
	case "files":
		d.files(k, v, c)
	case "inspect":
		d.inspect(k, v, c)
	case "inputs":
		d.inputs(k, v, c)
	case "http":
		d.http(k, v, c)
	case "preview":
		d.preview(k, v, c)
	case "snapshots":
		d.snapshots(k, v, c)
	case "runs":
		if m, ok := d.table(k, v, "record_text"); ok {
			c.Runs = &protocol.RunsSpec{}
			if x, ok := m["record_text"]; ok {
				c.Runs.RecordText, _ = d.boolean(k+".record_text", x)
			}
		}
	}
}

// base is the top-level base: one of Bases (with or without "glovebox/"),
// or a base from another flake.
func (d *doc) base(k string, v any, c *Config) {
	s, ok := d.str(k, v)
	if !ok {
		return
	}
	if b := strings.TrimPrefix(s, "glovebox/"); slices.Contains(Bases, b) {
		c.Base = b
	} else if ref, attr, err := ParseFlakeBase(s); err != nil {
		if hint := didYouMean(b, Bases); hint != "" && !strings.Contains(s, "#") {
			d.errorf(k, "%q is not a base image%s: use one of %s (lower case), or %s", s, hint, strings.Join(Bases, ", "), flakeBaseHelp)
		} else {
			d.errorf(k, "%v", err)
		}
	} else {
		c.Base, c.BaseFlake, c.BaseAttr = s, ref, attr
	}
}

// files is [files]: whether GET /files/{id} serves parked files inline
// or as downloads.
func (d *doc) files(k string, v any, c *Config) {
	if m, ok := d.table(k, v, "inline"); ok {
		c.Files = &protocol.FilesSpec{}
		if x, ok := m["inline"]; ok {
			c.Files.Inline, _ = d.boolean(k+".inline", x)
		}
	}
}

// inspect is [inspect]: whether the box serves the inspector.
func (d *doc) inspect(k string, v any, c *Config) {
	if m, ok := d.table(k, v, "enabled"); ok {
		c.Inspect = &protocol.InspectSpec{}
		if x, ok := m["enabled"]; ok {
			c.Inspect.Enabled, _ = d.boolean(k+".enabled", x)
		}
	}
}

// preview is [preview]: the wildcard domain sessions' preview ports are
// served under, and whether their URLs are http://.
func (d *doc) preview(k string, v any, c *Config) {
	m, ok := d.table(k, v, "domain", "http")
	if !ok {
		return
	}
	p := &protocol.PreviewSpec{}
	if x, ok := m["domain"]; ok {
		p.Domain, _ = d.str(k+".domain", x)
	}
	if x, ok := m["http"]; ok {
		p.HTTP, _ = d.boolean(k+".http", x)
	}
	if err := p.Check(); err != nil {
		d.errorf(k+".domain", "%s", strings.TrimPrefix(err.Error(), "manifest: preview.domain "))
	}
	c.Preview = p
}

// acrossTables checks what no one table can: the Kubernetes requests
// against [limits], a Go agent against the Railway builder, and the Fly
// machine [limits] asks for.
func (d *doc) acrossTables(c *Config) {
	d.kubeRequestsWithinLimits(c)
	if persists(c) && c.Deploy.Kubernetes.Replicas > 1 {
		d.errorf("deploy.kubernetes.replicas", "%d replicas with sessions.persist: the sessions live on one ReadWriteOnce volume, which one pod mounts; use 1 replica (one Deployment per volume)", c.Deploy.Kubernetes.Replicas)
	}
	if c.Agent.Type == protocol.AgentGo && c.Deploy.Railway.Builder == BuilderNixpacks {
		d.errorf("deploy.railway.builder", "nixpacks cannot build a Go agent (it builds dist/ alone, with the stock kit): use \"dockerfile\", which builds the agent's module with the box directory as the Railway service's Root Directory")
	}
	if _, err := flyMachine(c); err != nil {
		var ke *keyError
		if errors.As(err, &ke) {
			d.errorf(ke.Key, "%s", ke.Msg)
		}
	}
}

func (d *doc) packages(path string, v any, c *Config) {
	m, ok := d.table(path, v, "nix", "pip", "npm", "apt")
	if !ok {
		return
	}
	list := func(k string, re *regexp.Regexp, what string) []string {
		p := path + "." + k
		raw, ok := m[k]
		if !ok {
			return nil
		}
		names, _ := d.strList(p, raw)
		seen := map[string]bool{}
		var out []string
		for i, n := range names {
			ep := fmt.Sprintf("%s[%d]", p, i)
			switch {
			case !re.MatchString(n):
				d.errorf(ep, "%q is not a valid %s", n, what)
			case seen[n]:
				d.errorf(ep, "%q is listed twice", n)
			default:
				seen[n] = true
				out = append(out, n)
			}
		}
		return out
	}
	c.Packages.Nix = list("nix", nixAttrRE, "nixpkgs attribute path (e.g. \"jq\", \"ffmpeg-headless\" or \"python3Packages.rich\")")
	d.checkNixNames(path+".nix", c.Packages.Nix, knownNixNames, pins[DefaultBranch].Rev, c)
	c.Packages.Pip = list("pip", pipRE, "Python package name (names only: the version comes from the pinned nixpkgs), e.g. \"rich\"")
	c.Packages.Npm = list("npm", npmRE, "npm package name, e.g. \"cowsay\" or \"@scope/tool@1.2\"")
	if raw, ok := m["apt"]; ok {
		names, _ := d.strList(path+".apt", raw)
		for i, n := range names {
			hint := "find its nixpkgs attribute name (e.g. on search.nixos.org) and list it under packages.nix"
			if a, ok := aptToNix[n]; ok {
				hint = fmt.Sprintf("list the nixpkgs attribute %q under packages.nix", a)
			}
			d.errorf(fmt.Sprintf("%s.apt[%d]", path, i), "apt packages are not supported: boxes are built with Nix, and apt names are not nixpkgs names; for %q, %s", n, hint)
		}
	}
	sort.Strings(c.Packages.Nix)
	sort.Strings(c.Packages.Pip)
	sort.Strings(c.Packages.Npm)
}

func (d *doc) env(path string, v any, c *Config) {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "want a table of variables, e.g. [env.OPENAI_API_KEY], got %s", tomlType(v))
		return
	}
	names := sortedKeys(m)
	sort.SliceStable(names, func(i, j int) bool {
		return d.line(joinPath(path, names[i:i+1])) < d.line(joinPath(path, names[j:j+1]))
	})
	for _, name := range names {
		p := joinPath(path, []string{name})
		if !envNameRE.MatchString(name) {
			d.errorf(p, "%q is not a valid variable name: use letters, digits and _, not starting with a digit", name)
			continue
		}
		if strings.HasPrefix(name, "GLOVEBOX_") {
			d.errorf(p, "%q is reserved: GLOVEBOX_* variables belong to the kit", name)
			continue
		}
		if why, ok := imageEnv[name]; ok {
			d.errorf(p, "%q is reserved: %s", name, why)
			continue
		}
		t, ok := d.table(p, m[name], "required", "secret", "default", "description", "inject")
		if !ok {
			continue
		}
		var spec protocol.EnvSpec
		if x, ok := t["required"]; ok {
			spec.Required, _ = d.boolean(p+".required", x)
		}
		if x, ok := t["secret"]; ok {
			spec.Secret, _ = d.boolean(p+".secret", x)
		}
		if x, ok := t["default"]; ok {
			spec.Default, _ = d.str(p+".default", x)
			if strings.ContainsAny(spec.Default, "\x00\n\r") {
				d.errorf(p+".default", "a default must be one line of text (it becomes an image environment value)")
			}
		}
		if x, ok := t["description"]; ok {
			spec.Description, _ = d.str(p+".description", x)
		}
		if x, ok := t["inject"]; ok {
			spec.Inject = d.inject(p+".inject", x, spec)
		}
		c.Env[name] = spec
		c.EnvOrder = append(c.EnvOrder, name)
	}
}

func (d *doc) fs(path string, v any, c *Config) {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "want a table of mounts, e.g. [fs.work] path = \"/work\" writable = true, got %s", tomlType(v))
		return
	}
	// As in v1, an fs table replaces the default layout.
	c.FS = map[string]protocol.Mount{}
	paths := map[string]string{}
	for _, k := range sortedKeys(m) {
		p := joinPath(path, []string{k})
		if !mountRE.MatchString(k) {
			d.errorf(p, "%q is not a valid mount name: use lowercase letters, digits, _ and -", k)
			continue
		}
		t, ok := d.table(p, m[k], "path", "writable")
		if !ok {
			continue
		}
		var mt protocol.Mount
		if x, ok := t["path"]; ok {
			mt.Path, _ = d.str(p+".path", x)
		} else {
			d.errorf(p, "missing path")
		}
		if x, ok := t["writable"]; ok {
			mt.Writable, _ = d.boolean(p+".writable", x)
		}
		if _, given := t["path"]; given && (!pathpkg.IsAbs(mt.Path) || pathpkg.Clean(mt.Path) != mt.Path || mt.Path == "/") {
			d.errorf(p+".path", "%q must be a clean absolute path other than /, e.g. \"/work\"", mt.Path)
		}
		if other, dup := paths[mt.Path]; dup && mt.Path != "" {
			d.errorf(p+".path", "%q is also the path of fs.%s", mt.Path, other)
		}
		paths[mt.Path] = k
		c.FS[k] = mt
	}
	for _, k := range []string{protocol.MountWork, protocol.MountOutput} {
		if mt, ok := c.FS[k]; ok && !mt.Writable {
			d.errorf(joinPath(path, []string{k}), "the %s mount must be writable", k)
		}
	}
}

func (d *doc) sessions(path string, v any, c *Config) {
	m, ok := d.table(path, v, "shared_dirs", "resume_grace", "max", "max_queue", "drain", "pause", "lifetime", "persist")
	if !ok {
		return
	}
	s := &protocol.SessionsSpec{}
	if x, ok := m["shared_dirs"]; ok {
		s.SharedDirs, _ = d.boolean(path+".shared_dirs", x)
	}
	if x, ok := m["persist"]; ok {
		s.Persist, _ = d.boolean(path+".persist", x)
	}
	if x, ok := m["resume_grace"]; ok {
		if str, ok := d.str(path+".resume_grace", x); ok {
			if _, err := protocol.ParseDuration(str); err != nil {
				d.errorf(path+".resume_grace", "%v", err)
			}
			s.ResumeGrace = str
		}
	}
	if x, ok := m["drain"]; ok {
		if str, ok := d.str(path+".drain", x); ok {
			if _, err := protocol.ParseDuration(str); err != nil {
				d.errorf(path+".drain", "%v", err)
			}
			s.Drain = str
		}
	}
	if x, ok := m["pause"]; ok {
		if str, ok := d.str(path+".pause", x); ok {
			if _, err := protocol.ParseDuration(str); err != nil && str != "off" {
				d.errorf(path+".pause", "%v (a duration, or \"off\")", err)
			}
			s.Pause = str
		}
	}
	if x, ok := m["lifetime"]; ok {
		if str, ok := d.str(path+".lifetime", x); ok {
			if _, err := protocol.ParseDuration(str); err != nil {
				d.errorf(path+".lifetime", "%v", err)
			}
			s.Lifetime = str
		}
	}
	if x, ok := m["max"]; ok {
		s.Max, _ = d.integer(path+".max", x)
	}
	if x, ok := m["max_queue"]; ok {
		s.MaxQueue, _ = d.integer(path+".max_queue", x)
	}
	c.Sessions = s
}

// inputs decodes [inputs]: whether url inputs may reach private and
// loopback addresses.
func (d *doc) inputs(path string, v any, c *Config) {
	m, ok := d.table(path, v, "allow_private_urls", "allow_loopback_urls")
	if !ok {
		return
	}
	in := &protocol.InputsSpec{}
	for _, f := range []struct {
		k   string
		dst *bool
	}{{"allow_private_urls", &in.AllowPrivateURLs}, {"allow_loopback_urls", &in.AllowLoopbackURLs}} {
		if x, ok := m[f.k]; ok {
			if b, ok := d.boolean(path+"."+f.k, x); ok {
				*f.dst = b
			}
		}
	}
	c.Inputs = in
}

// http decodes [http]: the web origins whose pages may call the box's
// HTTP routes.
func (d *doc) http(path string, v any, c *Config) {
	m, ok := d.table(path, v, "cors_origins")
	if !ok {
		return
	}
	h := &protocol.HTTPSpec{}
	if x, ok := m["cors_origins"]; ok {
		if l, ok := d.strList(path+".cors_origins", x); ok {
			for _, o := range l {
				switch err := protocol.CheckOrigin(o); {
				case o == "*" && len(l) > 1:
					d.errorf(path+".cors_origins", `"*" allows every origin; list it alone`)
				case o != "*" && err != nil:
					d.errorf(path+".cors_origins", "%v", err)
				}
			}
			h.CORSOrigins = l
		}
	}
	c.HTTP = h
}

// sandbox decodes [sandbox]: layers to turn off, layers to require,
// whether the box may serve degraded, the session uid range and the
// per-session process and file caps.
func (d *doc) sandbox(path string, v any, c *Config) {
	m, ok := d.table(path, v, "enabled", "users", "mount", "pid", "network", "cgroup", "landlock", "seccomp", "require", "allow_degraded", "uid_base", "uid_count", "pids", "files")
	if !ok {
		return
	}
	s := &protocol.SandboxSpec{}
	for _, f := range []struct {
		k   string
		dst **bool
	}{{"enabled", &s.Enabled}, {"users", &s.Users}, {"mount", &s.Mount}, {"pid", &s.PID}, {"network", &s.Network}, {"cgroup", &s.Cgroup}, {"landlock", &s.Landlock}, {"seccomp", &s.Seccomp}} {
		if x, ok := m[f.k]; ok {
			if b, ok := d.boolean(path+"."+f.k, x); ok {
				*f.dst = &b
			}
		}
	}
	if x, ok := m["require"]; ok {
		if l, ok := d.strList(path+".require", x); ok {
			for _, layer := range l {
				if !slices.Contains(protocol.SandboxLayers, layer) {
					d.errorf(path+".require", "%q is not a sandbox layer: use %s", layer, strings.Join(protocol.SandboxLayers, ", "))
				}
			}
			s.Require = l
		}
	}
	if x, ok := m["allow_degraded"]; ok {
		s.AllowDegraded, _ = d.boolean(path+".allow_degraded", x)
	}
	for _, f := range []struct {
		k   string
		dst *int
		min int
	}{{"uid_base", &s.UIDBase, 1000}, {"uid_count", &s.UIDCount, 1}, {"pids", &s.Pids, 16}, {"files", &s.Files, 64}} {
		if x, ok := m[f.k]; ok {
			if n, ok := d.integer(path+"."+f.k, x); ok {
				if n < f.min {
					d.errorf(path+"."+f.k, "%d is too small: use %d or more", n, f.min)
				}
				*f.dst = n
			}
		}
	}
	c.Sandbox = s
}

// snapshots decodes [snapshots]: the store ("local" or "s3"), the S3 key
// prefix, and the quotas.
func (d *doc) snapshots(path string, v any, c *Config) {
	m, ok := d.table(path, v, "store", "prefix", "max_size", "max_snapshots")
	if !ok {
		return
	}
	s := &protocol.SnapshotsSpec{}
	if x, ok := m["store"]; ok {
		if str, ok := d.str(path+".store", x); ok {
			if str != protocol.SnapshotStoreLocal && str != protocol.SnapshotStoreS3 {
				d.errorf(path+".store", "%q: use %q or %q", str, protocol.SnapshotStoreLocal, protocol.SnapshotStoreS3)
			}
			s.Store = str
		}
	}
	if x, ok := m["prefix"]; ok {
		s.Prefix, _ = d.str(path+".prefix", x)
	}
	if x, ok := m["max_size"]; ok {
		if str, ok := d.str(path+".max_size", x); ok {
			if _, err := protocol.ParseSize(str); err != nil {
				d.errorf(path+".max_size", "%v", err)
			}
			s.MaxSize = str
		}
	}
	if x, ok := m["max_snapshots"]; ok {
		if n, ok := d.integer(path+".max_snapshots", x); ok {
			if n < 1 {
				d.errorf(path+".max_snapshots", "%d: want at least 1", n)
			}
			s.MaxSnapshots = n
		}
	}
	c.Snapshots = s
}
