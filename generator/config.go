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
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// ConfigFile is the name of the box config in a box directory.
const ConfigFile = "glovebox.toml"

// Bases are the base images a box may start from, in the order the docs
// list them.
var Bases = []string{"base", "media", "docs", "python", "browser"}

// Config is a decoded, checked glovebox.toml.
type Config struct {
	// Dir is the directory the config was loaded from ("" for Parse).
	Dir string
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

// aptToNix suggests the nixpkgs attribute for apt names authors of v1
// boxes commonly listed.
var aptToNix = map[string]string{
	"poppler-utils":          "poppler-utils",
	"imagemagick":            "imagemagick",
	"ffmpeg":                 "ffmpeg-headless",
	"libreoffice":            "libreoffice",
	"pdftk":                  "pdftk",
	"pdftk-java":             "pdftk",
	"ghostscript":            "ghostscript",
	"chromium":               "chromium",
	"python3":                "python3",
	"python3-pip":            "python3Packages.pip",
	"nodejs":                 "nodejs_22",
	"jq":                     "jq",
	"curl":                   "curl",
	"git":                    "git",
	"sox":                    "sox",
	"pandoc":                 "pandoc",
	"qpdf":                   "qpdf",
	"tesseract-ocr":          "tesseract",
	"fonts-noto-color-emoji": "noto-fonts-color-emoji",
	"fonts-dejavu":           "dejavu_fonts",
	"build-essential":        "gcc",
}

// Parse decodes and checks a glovebox.toml held in data; file names it in
// messages.
func Parse(file string, data []byte) (*Config, error) {
	d, err := parseDoc(file, data)
	if err != nil {
		return nil, err
	}
	c := &Config{
		File:    file,
		Name:    "glovebox-app",
		Version: "0.1.0",
		Base:    "base",
		Env:     map[string]protocol.EnvSpec{},
		Storage: protocol.StoragePolicy{Inputs: protocol.DefaultInputsPolicy(), Outputs: protocol.DefaultOutputsPolicy()},
		FS:      protocol.DefaultFS(),
		Agent:   protocol.AgentSpec{Type: protocol.AgentExec},
		Deploy:  Deploy{Railway: Railway{Builder: BuilderDockerfile}},
	}
	root, _ := d.table("", d.root, "name", "version", "base", "packages", "env", "storage", "limits", "fs", "sessions", "agent", "deploy", "network", "sandbox", "files", "inspect", "inputs")
	for _, k := range sortedKeys(root) {
		v := root[k]
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
			if s, ok := d.str(k, v); ok {
				if b := strings.TrimPrefix(s, "glovebox/"); slices.Contains(Bases, b) {
					c.Base = b
				} else if ref, attr, err := ParseFlakeBase(s); err != nil {
					d.errorf(k, "%v", err)
				} else {
					c.Base, c.BaseFlake, c.BaseAttr = s, ref, attr
				}
			}
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
			if m, ok := d.table(k, v, "inline"); ok {
				c.Files = &protocol.FilesSpec{}
				if x, ok := m["inline"]; ok {
					c.Files.Inline, _ = d.boolean(k+".inline", x)
				}
			}
		case "inspect":
			if m, ok := d.table(k, v, "enabled"); ok {
				c.Inspect = &protocol.InspectSpec{}
				if x, ok := m["enabled"]; ok {
					c.Inspect.Enabled, _ = d.boolean(k+".enabled", x)
				}
			}
		case "inputs":
			d.inputs(k, v, c)
		}
	}
	if len(d.probs) == 0 {
		if _, err := flyMachine(c); err != nil {
			var ke *keyError
			if errors.As(err, &ke) {
				d.errorf(ke.Key, "%s", ke.Msg)
			}
		}
	}
	d.injectReachable(c)
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
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

func (d *doc) storage(path string, v any, c *Config) {
	m, ok := d.table(path, v, "inputs", "outputs")
	if !ok {
		return
	}
	if x, ok := m["inputs"]; ok {
		if p, ok := d.policy(path+".inputs", x, false); ok {
			c.Storage.Inputs = p
		}
	}
	if x, ok := m["outputs"]; ok {
		if p, ok := d.policy(path+".outputs", x, true); ok {
			c.Storage.Outputs = p
		}
	}
}

// policy decodes an array of rule tables ([[storage.outputs]]) with the
// meaning of v1's rule constructors: a rule with no bound and no explicit
// always/default is a default rule for inline and localServer and an
// always rule for the others; localServer's ttl defaults to 1h.
func (d *doc) policy(path string, v any, outputs bool) (protocol.Policy, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		d.errorf(path, "want one or more rules, e.g.\n  [[%s]]\n  use = \"inline\"\n  below = \"1MB\"", path)
		return protocol.Policy{}, false
	}
	good := true
	var rules []protocol.Rule
	for i, e := range arr {
		p := fmt.Sprintf("%s[%d]", path, i)
		r, ok := d.rule(p, e, outputs)
		good = good && ok
		rules = append(rules, r)
	}
	if !good {
		return protocol.Policy{}, false
	}
	pol := protocol.Policy{Rules: rules}
	if outputs {
		terminal := false
		for _, r := range rules {
			terminal = terminal || r.When.Always || r.When.Default
		}
		if !terminal {
			d.errorf(path, "outputs need a terminal rule (one with no size bound, or always = true, or default = true) so every file size has a home")
			return pol, false
		}
	}
	return pol, true
}

func (d *doc) rule(p string, v any, outputs bool) (protocol.Rule, bool) {
	t, ok := d.table(p, v, "use", "above", "below", "always", "default", "ttl", "bucket", "region", "prefix", "options")
	if !ok {
		return protocol.Rule{}, false
	}
	before := len(d.probs)
	var r protocol.Rule
	use, ok := t["use"]
	if !ok {
		d.errorf(p, "missing use: name the adapter (inline, url, localServer, s3, gcs or a custom one)")
		return r, false
	}
	if s, ok := d.str(p+".use", use); ok {
		r.Use.Adapter = s
		if !adapterRE.MatchString(s) {
			d.errorf(p+".use", "%q is not an adapter name: use inline, url, localServer, s3 or a custom adapter's key", s)
		} else {
			d.checkAdapter(p+".use", s)
		}
	}
	if outputs && r.Use.Adapter == protocol.AdapterURL {
		d.errorf(p+".use", "outputs may not use adapter \"url\": it is read-only")
	}
	opts := map[string]any{}
	if x, ok := t["options"]; ok {
		if m, ok := d.strMap(p+".options", x); ok {
			for k, s := range m {
				opts[k] = s
			}
		}
	}
	for _, k := range []string{"above", "below"} {
		x, ok := t[k]
		if !ok {
			continue
		}
		s, ok := d.str(p+"."+k, x)
		if !ok {
			continue
		}
		if _, err := protocol.ParseSize(s); err != nil {
			d.errorf(p+"."+k, "%v", err)
		}
		if k == "above" {
			r.When.SizeAbove = s
		} else {
			r.When.SizeBelow = s
		}
	}
	if x, ok := t["always"]; ok {
		r.When.Always, _ = d.boolean(p+".always", x)
	}
	if x, ok := t["default"]; ok {
		r.When.Default, _ = d.boolean(p+".default", x)
	}
	if r.When.Always && r.When.Default {
		d.errorf(p, "a rule is either always or default, not both")
	}
	if (r.When.Always || r.When.Default) && (r.When.SizeAbove != "" || r.When.SizeBelow != "") {
		d.errorf(p, "a rule with a size bound cannot also be always or default")
	}
	_, hasAlways := t["always"]
	_, hasDefault := t["default"]
	if r.When.SizeAbove == "" && r.When.SizeBelow == "" && !hasAlways && !hasDefault {
		switch r.Use.Adapter {
		case protocol.AdapterInline, protocol.AdapterLocalServer:
			r.When.Default = true
		default:
			r.When.Always = true
		}
	}
	if x, ok := t["ttl"]; ok {
		if r.Use.Adapter != protocol.AdapterLocalServer {
			d.errorf(p+".ttl", "ttl is only for use = \"localServer\"")
		} else if s, ok := d.str(p+".ttl", x); ok {
			if _, err := protocol.ParseDuration(s); err != nil {
				d.errorf(p+".ttl", "%v", err)
			}
			opts["ttl"] = s
		}
	} else if r.Use.Adapter == protocol.AdapterLocalServer {
		if _, set := opts["ttl"]; !set {
			opts["ttl"] = "1h"
		}
	}
	for _, k := range []string{"bucket", "region", "prefix"} {
		x, ok := t[k]
		if !ok {
			continue
		}
		if r.Use.Adapter != protocol.AdapterS3 && r.Use.Adapter != protocol.AdapterGCS {
			d.errorf(p+"."+k, "%s is only for use = \"s3\" or \"gcs\"", k)
			continue
		}
		if s, ok := d.str(p+"."+k, x); ok {
			opts[k] = s
		}
	}
	if (r.Use.Adapter == protocol.AdapterS3 || r.Use.Adapter == protocol.AdapterGCS) && opts["bucket"] == nil {
		d.errorf(p, "use = %q needs a bucket", r.Use.Adapter)
	}
	if len(opts) > 0 {
		r.Use.Options = opts
	}
	if len(d.probs) == before {
		// What the kit will check at boot (e.g. an options.ttl).
		if err := (protocol.Policy{Rules: []protocol.Rule{r}}).Check(); err != nil {
			d.errorf(p, "%s", strings.TrimPrefix(err.Error(), "rule 1 "))
		}
	}
	return r, len(d.probs) == before
}

func (d *doc) limits(path string, v any, c *Config) {
	m, ok := d.table(path, v, "cpu", "memory", "timeout", "max_message", "max_input", "input_timeout", "disk", "max_connections", "frame_budget")
	if !ok {
		return
	}
	get := func(k string) string {
		x, ok := m[k]
		if !ok {
			return ""
		}
		s, _ := d.str(path+"."+k, x)
		return s
	}
	switch n := m["cpu"].(type) {
	case int64:
		c.Limits.CPU = strconv.FormatInt(n, 10)
	case float64:
		c.Limits.CPU = strconv.FormatFloat(n, 'f', -1, 64)
	default:
		c.Limits.CPU = get("cpu")
	}
	if c.Limits.CPU != "" {
		if f, err := strconv.ParseFloat(c.Limits.CPU, 64); !cpuRE.MatchString(c.Limits.CPU) || err != nil || f <= 0 || f > 256 {
			d.errorf(path+".cpu", "%q is not a CPU count: want a number from 0.1 to 256 such as \"1\", \"2\" or \"0.5\"", c.Limits.CPU)
		}
	}
	if x, ok := m["max_connections"]; ok {
		if n, isInt := x.(int64); isInt && n >= 0 && n <= 1<<20 {
			c.Limits.MaxConnections = int(n)
		} else {
			d.errorf(path+".max_connections", "%v is not a connection count: want a whole number such as 4096 (0 or absent: the default)", x)
		}
	}
	c.Limits.Disk = get("disk")
	if c.Limits.Disk != "" {
		if _, err := protocol.ParseQuantity(c.Limits.Disk); err != nil {
			d.errorf(path+".disk", "%v", err)
		}
	}
	c.Limits.Memory = get("memory")
	if c.Limits.Memory != "" {
		if _, err := MemoryMB(c.Limits.Memory); err != nil {
			d.errorf(path+".memory", "%v", err)
		}
	}
	for _, f := range []struct {
		k   string
		dst *string
		dur bool
	}{{"timeout", &c.Limits.Timeout, true}, {"input_timeout", &c.Limits.InputTimeout, true}, {"max_message", &c.Limits.MaxMessage, false}, {"max_input", &c.Limits.MaxInput, false}, {"frame_budget", &c.Limits.FrameBudget, false}} {
		s := get(f.k)
		if s == "" {
			continue
		}
		*f.dst = s
		var err error
		if f.dur {
			_, err = protocol.ParseDuration(s)
		} else {
			_, err = protocol.ParseSize(s)
		}
		if err != nil {
			d.errorf(path+"."+f.k, "%v", err)
		}
	}
}

// MemoryMB parses a memory limit in MB: v1 size strings ("512MB", "2GB")
// and Kubernetes forms ("512Mi", "2Gi").
func MemoryMB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(t, "i") {
		t = strings.TrimSuffix(t, "i") + "B"
	}
	n, err := protocol.ParseSize(t)
	if err != nil || n < protocol.MB {
		return 0, fmt.Errorf("memory %q: want a size of at least 1MB such as \"512MB\", \"2GB\" or \"2Gi\"", s)
	}
	return n / protocol.MB, nil
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
	m, ok := d.table(path, v, "shared_dirs", "resume_grace", "max", "max_queue", "drain")
	if !ok {
		return
	}
	s := &protocol.SessionsSpec{}
	if x, ok := m["shared_dirs"]; ok {
		s.SharedDirs, _ = d.boolean(path+".shared_dirs", x)
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

// sandbox decodes [sandbox]: layers to turn off, layers to require, the
// session uid range and the per-session process and file caps.
func (d *doc) sandbox(path string, v any, c *Config) {
	m, ok := d.table(path, v, "enabled", "users", "mount", "pid", "network", "cgroup", "require", "uid_base", "uid_count", "pids", "files")
	if !ok {
		return
	}
	s := &protocol.SandboxSpec{}
	for _, f := range []struct {
		k   string
		dst **bool
	}{{"enabled", &s.Enabled}, {"users", &s.Users}, {"mount", &s.Mount}, {"pid", &s.PID}, {"network", &s.Network}, {"cgroup", &s.Cgroup}} {
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

func (d *doc) agent(path string, v any, c *Config) {
	m, ok := d.table(path, v, "type", "command", "env", "main", "vendor_hash", "warm")
	if !ok {
		return
	}
	a := protocol.AgentSpec{Type: protocol.AgentExec}
	if x, ok := m["type"]; ok {
		if s, ok := d.str(path+".type", x); ok {
			a.Type = s
		}
	}
	switch a.Type {
	case protocol.AgentExec, protocol.AgentGo, protocol.AgentACP:
	default:
		d.errorf(path+".type", "%q is not an agent type: use exec, acp or go", a.Type)
	}
	if x, ok := m["command"]; ok {
		if a.Type != protocol.AgentACP {
			d.errorf(path+".command", "command is only for type = \"acp\"")
		} else if cmd, ok := d.strList(path+".command", x); ok {
			a.Command = cmd
		}
	}
	if a.Type == protocol.AgentACP && (len(a.Command) == 0 || strings.TrimSpace(a.Command[0]) == "") {
		if _, given := m["command"]; !given || len(a.Command) == 0 {
			d.errorf(path, "type = \"acp\" needs a command, e.g. command = [\"npx\", \"my-acp-agent\"]")
		} else {
			d.errorf(path+".command", "the program name is empty")
		}
	}
	if x, ok := m["env"]; ok {
		if a.Type != protocol.AgentACP {
			d.errorf(path+".env", "env is only for type = \"acp\"")
		} else if env, ok := d.strMap(path+".env", x); ok {
			for _, k := range sortedKeys(env) {
				if !envNameRE.MatchString(k) {
					d.errorf(joinPath(path+".env", []string{k}), "%q is not a valid variable name", k)
				}
			}
			if len(env) > 0 {
				a.Env = env
			}
		}
	}
	if x, ok := m["main"]; ok {
		if a.Type != protocol.AgentGo {
			d.errorf(path+".main", "main is only for type = \"go\"")
		} else if s, ok := d.str(path+".main", x); ok {
			if !goMainRE.MatchString(s) || strings.Contains(s, "..") {
				d.errorf(path+".main", "%q is not a main package inside the box directory: write it as \"./cmd/myagent\" (letters, digits, . _ - and /)", s)
			}
			c.AgentMain = s
		}
	} else if a.Type == protocol.AgentGo {
		d.errorf(path, "type = \"go\" needs main, the Go main package that calls kit.Main, e.g. main = \"./cmd/myagent\" (the box directory holds its Go module)")
	}
	if x, ok := m["vendor_hash"]; ok {
		if a.Type != protocol.AgentGo {
			d.errorf(path+".vendor_hash", "vendor_hash is only for type = \"go\"")
		} else if s, ok := d.str(path+".vendor_hash", x); ok {
			if !narHashRE.MatchString(s) {
				d.errorf(path+".vendor_hash", "%q is not an SRI sha256 hash such as \"sha256-...=\": use the one Nix prints on the first build", s)
			}
			c.AgentVendorHash = s
		}
	}
	if x, ok := m["warm"]; ok {
		if n, ok := d.integer(path+".warm", x); ok {
			if n < 0 || n > protocol.MaxWarm {
				d.errorf(path+".warm", "%d warm sessions: use 0 (off) to %d", n, protocol.MaxWarm)
			} else {
				a.Warm = &n
			}
		}
	}
	c.Agent = a
}

// goMainRE is a main package path relative to the box directory.
var goMainRE = regexp.MustCompile(`^\./[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)
