package generator

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		SHA256:  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", // of no bytes
		File:    "glovebox.toml",
		Name:    "glovebox-app",
		Version: "0.1.0",
		Base:    "base",
		Env:     map[string]protocol.EnvSpec{},
		Storage: protocol.StoragePolicy{Inputs: protocol.DefaultInputsPolicy(), Outputs: protocol.DefaultOutputsPolicy()},
		FS:      protocol.DefaultFS(),
		Agent:   protocol.AgentSpec{Type: protocol.AgentExec},
		Deploy:  Deploy{Railway: Railway{Builder: BuilderDockerfile}, Kubernetes: Kubernetes{PodSecurity: PodBaseline}},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Parse(empty) mismatch (-want +got):\n%s", diff)
	}
	m := c.Manifest("ba7816bf...15ad")
	if m.Base != "glovebox/base" || m.ProtocolVersion != 1 || m.AgentType() != protocol.AgentExec {
		t.Errorf("Manifest = %+v", m)
	}
	if err := m.Check(); err != nil {
		t.Errorf("default manifest does not pass Check: %v", err)
	}
}

// TestParseStorageRules checks that TOML rules mean what v1's rule
// constructors mean.
func TestParseStorageRules(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`
[[storage.outputs]]
use = "inline"
below = "1MB"

[[storage.outputs]]
use = "localServer"
ttl = "24h"
above = "1KB"

[[storage.outputs]]
use = "s3"
bucket = "b"

[[storage.outputs]]
use = "localServer"

[[storage.inputs]]
use = "url"
below = "10MB"
above = "1KB"

[[storage.inputs]]
use = "inline"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.StoragePolicy{
		Inputs: protocol.Policy{Rules: []protocol.Rule{
			{Use: protocol.Use{Adapter: "url"}, When: protocol.When{SizeAbove: "1KB", SizeBelow: "10MB"}},
			{Use: protocol.Use{Adapter: "inline"}, When: protocol.When{Default: true}},
		}},
		Outputs: protocol.Policy{Rules: []protocol.Rule{
			{Use: protocol.Use{Adapter: "inline"}, When: protocol.When{SizeBelow: "1MB"}},
			{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "24h"}}, When: protocol.When{SizeAbove: "1KB"}},
			{Use: protocol.Use{Adapter: "s3", Options: map[string]any{"bucket": "b"}}, When: protocol.When{Always: true}},
			{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "1h"}}, When: protocol.When{Default: true}},
		}},
	}
	if diff := cmp.Diff(want, c.Storage); diff != "" {
		t.Errorf("storage mismatch (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		toml string
		want []string // each "line: text" must appear, in this order
	}{
		{"syntax", "name = \n", []string{"glovebox.toml:1: not valid TOML"}},
		{"duplicate key", "name = \"a\"\nname = \"b\"\n", []string{"glovebox.toml:2: not valid TOML"}},
		{"unknown top key", "name = \"a\"\n\nnmae = \"b\"\n", []string{`glovebox.toml:3: nmae: unknown key "nmae" (did you mean "name"?); allowed here: name, version, base`}},
		{"bad name", `name = "My Box"`, []string{`glovebox.toml:1: name: "My Box" is not a valid box name`}},
		{"name type", `name = 3`, []string{`glovebox.toml:1: name: want a string, got the integer 3`}},
		{"bad version", `version = "1 0"`, []string{`glovebox.toml:1: version: "1 0" is not a valid version`}},
		{"bad base", `base = "ubuntu:22.04"`, []string{`glovebox.toml:1: base: "ubuntu:22.04" is not a base image: use one of base, media, docs, python, browser, or write a base from another flake as "<flakeref>#<name>"`}},
		{"flake base scheme", "name = \"x\"\nbase = \"git+ssh://git@example.com/b#ml\"\n", []string{`glovebox.toml:2: base: "git+ssh://git@example.com/b#ml" is not a base image`, `github:owner/repo[/ref], git+https://host/path, https://host/file.tar.gz (a tarball) or path:/absolute/dir`}},
		{"flake base unsafe char", `base = "github:acme/b${x}#ml"`, []string{`glovebox.toml:1: base: "github:acme/b${x}#ml": the flake reference contains '$', which is not allowed: use letters, digits and - . _ ~ : / ? & = % + @ , only`}},
		{"flake base quote", `base = 'github:acme/b"#ml'`, []string{`contains '"', which is not allowed`}},
		{"flake base space", `base = "github:acme/b c#ml"`, []string{`contains ' ', which is not allowed`}},
		{"flake base no name", `base = "github:acme/bases#"`, []string{`glovebox.toml:1: base: "github:acme/bases#": "" is not a base name: after # write the name under lib.gloveboxBases`}},
		{"flake base bad name", `base = "github:acme/bases#m.l"`, []string{`"m.l" is not a base name`}},
		{"flake base two hashes", `base = "github:acme/bases#a#b"`, []string{`"a#b" is not a base name`}},
		{"flake base no hash", `base = "github:acme/bases"`, []string{`"github:acme/bases" is not a base image: use one of base, media, docs, python, browser, or write a base from another flake`}},
		{"flake base github no repo", `base = "github:acme#ml"`, []string{`"github:acme" is not a flake reference this generator accepts`}},
		{"flake base https not tarball", `base = "https://example.com/bases#ml"`, []string{`"https://example.com/bases" is not a flake reference this generator accepts`}},
		{"flake base http", `base = "http://example.com/b.tar.gz#ml"`, []string{`is not a base image`}},
		{"flake base relative path", `base = "path:./bases#ml"`, []string{`"path:./bases" is not a flake reference this generator accepts`}},
		{"flake base path dotdot", `base = "path:/srv/../etc#ml"`, []string{`is not a flake reference this generator accepts`}},
		{"flake base file", `base = "file:///srv/b.tar.gz#ml"`, []string{`is not a base image`}},
		{"apt refused", "[packages]\napt = [\"poppler-utils\", \"libfoo\"]\n", []string{
			`glovebox.toml:2: packages.apt[0]: apt packages are not supported`, `list the nixpkgs attribute "poppler-utils" under packages.nix`,
			`glovebox.toml:2: packages.apt[1]`, `search.nixos.org`}},
		{"bad nix attr", "[packages]\nnix = [\n  \"jq\",\n  \"foo bar\",\n]\n", []string{`glovebox.toml:4: packages.nix[1]: "foo bar" is not a valid nixpkgs attribute path`}},
		{"nix attr injection", "[packages]\nnix = [\"jq\\\"; x = \\\"\"]\n", []string{`packages.nix[0]`, `is not a valid nixpkgs attribute path`}},
		{"pip version", "[packages]\npip = [\"rich==13\"]\n", []string{`glovebox.toml:2: packages.pip[0]: "rich==13" is not a valid Python package name (names only`}},
		{"duplicate package", "[packages]\nnix = [\"jq\", \"jq\"]\n", []string{`packages.nix[1]: "jq" is listed twice`}},
		{"unknown package kind", "[packages]\nbrew = [\"jq\"]\n", []string{`glovebox.toml:2: packages.brew: unknown key "brew"; allowed here: nix, pip, npm, apt`}},
		{"env unknown field", "[env.KEY]\nrequired = true\nsecert = true\n", []string{`glovebox.toml:3: env.KEY.secert: unknown key "secert" (did you mean "secret"?); allowed here: required, secret, default, description`}},
		{"env bad name", "[env.\"1BAD\"]\nrequired = true\n", []string{`glovebox.toml:1: env.1BAD: "1BAD" is not a valid variable name`}},
		{"env reserved", "[env.GLOVEBOX_KEY]\nrequired = true\n", []string{`env.GLOVEBOX_KEY: "GLOVEBOX_KEY" is reserved`}},
		{"env PATH", "name = \"x\"\n[env.PATH]\ndefault = \"/usr/bin\"\n", []string{`glovebox.toml:2: env.PATH: "PATH" is reserved: the image sets it`, `list programs under [packages] instead`}},
		{"env HOME", "[env.HOME]\ndefault = \"/root\"\n", []string{`glovebox.toml:1: env.HOME: "HOME" is reserved`}},
		{"base case", "name = \"x\"\nbase = \"Media\"\n", []string{`glovebox.toml:2: base: "Media" is not a base image (did you mean "media"?): use one of base, media, docs, python, browser (lower case)`}},
		{"base typo", `base = "pyhton"`, []string{`glovebox.toml:1: base: "pyhton" is not a base image (did you mean "python"?)`}},
		{"duration zero", "[sessions]\ndrain = \"0s\"\n", []string{`glovebox.toml:2: sessions.drain`, `want a positive number of seconds, e.g. "30s"`}},
		{"kube image no tag", "name = \"x\"\n[deploy.kubernetes]\nimage = \"ghcr.io/acme/x\"\n", []string{`glovebox.toml:3: deploy.kubernetes.image: "ghcr.io/acme/x" names no tag or digest`, `add :0.1.0 (the box's version) or @sha256:<digest>`}},
		{"kube image bad", "[deploy.kubernetes]\nimage = \"GHCR.io/Acme/X:1\"\n", []string{`glovebox.toml:2: deploy.kubernetes.image: "GHCR.io/Acme/X:1" is not an image reference`}},
		{"kube namespace", "[deploy.kubernetes]\nnamespace = \"Agents_1\"\n", []string{`glovebox.toml:2: deploy.kubernetes.namespace: "Agents_1" is not a Kubernetes namespace name`}},
		{"kube replicas", "[deploy.kubernetes]\nreplicas = 0\n", []string{`glovebox.toml:2: deploy.kubernetes.replicas: 0 replicas: want 1 to 1000`}},
		{"kube resources", "[deploy.kubernetes]\nrequests = { cpu = \"half\", memroy = \"1Gi\" }\nlimits = { memory = \"0\" }\n", []string{
			`glovebox.toml:2: deploy.kubernetes.requests.cpu: half is not a Kubernetes quantity`,
			`glovebox.toml:2: deploy.kubernetes.requests.memroy: unknown key "memroy" (did you mean "memory"?)`,
			`glovebox.toml:3: deploy.kubernetes.limits.memory: 0 is not a Kubernetes quantity`}},
		{"kube request above limit", "[limits]\ncpu = \"2\"\nmemory = \"1GB\"\n[deploy.kubernetes]\nrequests = { cpu = \"2500m\", memory = \"512Mi\" }\nlimits = { ephemeral-storage = \"1Gi\" }\n", []string{
			`glovebox.toml:5: deploy.kubernetes.requests.cpu: requests cpu = "2500m" is more than its limit "2"`}},
		{"kube request above its limit", "[deploy.kubernetes]\nrequests = { memory = \"2Gi\", ephemeral-storage = \"2e9\" }\nlimits = { memory = \"1Gi\", ephemeral-storage = \"1Ei\" }\n", []string{
			`glovebox.toml:2: deploy.kubernetes.requests.memory: requests memory = "2Gi" is more than its limit "1Gi"`}},
		{"go agent on nixpacks", "[agent]\ntype = \"go\"\nmain = \"./cmd/a\"\n[deploy.railway]\nbuilder = \"nixpacks\"\n", []string{
			`glovebox.toml:5: deploy.railway.builder: nixpacks cannot build a Go agent`}},
		{"kube key", "[deploy.kubernetes]\nreplica = 2\n", []string{`deploy.kubernetes.replica: unknown key "replica" (did you mean "replicas"?)`}},
		{"sandbox", "[sandbox]\nnetwrok = false\nrequire = [\"mount\", \"vm\"]\nuid_base = 10\npid = \"no\"\n", []string{
			`glovebox.toml:2: sandbox.netwrok: unknown key "netwrok" (did you mean "network"?)`,
			`glovebox.toml:3: sandbox.require: "vm" is not a sandbox layer: use users, userns, privileges, mount, pid, network, cgroup`,
			`glovebox.toml:4: sandbox.uid_base: 10 is too small: use 1000 or more`,
			`glovebox.toml:5: sandbox.pid: want true or false, got the string "no"`}},
		{"sandbox allow_degraded type", "[sandbox]\nusers = true\nallow_degraded = \"yes\"\n", []string{
			`glovebox.toml:3: sandbox.allow_degraded: want true or false, got the string "yes"`}},
		{"sandbox allow_degraded typo", "[sandbox]\nallow_degradded = true\n", []string{
			`glovebox.toml:2: sandbox.allow_degradded: unknown key "allow_degradded" (did you mean "allow_degraded"?)`}},
		{"kubernetes pod_security", "[deploy.kubernetes]\npod_security = \"restrcted\"\n", []string{
			`glovebox.toml:2: deploy.kubernetes.pod_security: "restrcted" is not a Pod Security level (did you mean "restricted"?): use "baseline"`}},
		{"kubernetes pod_security type", "[deploy.kubernetes]\n\npod_security = true\n", []string{
			`glovebox.toml:3: deploy.kubernetes.pod_security: want a string, got the boolean true`}},
		{"kubernetes unknown key", "[deploy.kubernetes]\nimgae = \"x\"\n", []string{
			`glovebox.toml:2: deploy.kubernetes.imgae: unknown key "imgae" (did you mean "image"?); allowed here: pod_security, image, namespace, replicas, requests, limits`}},
		{"limits disk", "[limits]\ndisk = \"lots\"\n", []string{`glovebox.toml:2: limits.disk: size "lots"`}},
		{"inputs", "[inputs]\nallow_private_url = true\nallow_loopback_urls = 1\n", []string{
			`glovebox.toml:2: inputs.allow_private_url: unknown key "allow_private_url" (did you mean "allow_private_urls"?)`,
			`glovebox.toml:3: inputs.allow_loopback_urls: want true or false`}},
		{"preview domain", "[preview]\ndomain = \"https://p.example.com\"\n", []string{
			`glovebox.toml:2: preview.domain: "https://p.example.com" is not a domain name: want lower-case labels separated by dots, such as "preview.example.com", with no scheme, port or wildcard`}},
		{"preview without domain", "[preview]\nhttp = true\n", []string{
			`glovebox.toml:1: preview.domain: is empty: set the wildcard domain previews are served under, such as "preview.example.com"`}},
		{"http", "[http]\ncors_origin = []\n", []string{`glovebox.toml:2: http.cors_origin: unknown key "cors_origin" (did you mean "cors_origins"?)`}},
		{"cors origins", "[http]\ncors_origins = [\"https://app.example.com/\", \"HTTPS://B.example\", \"*\"]\n", []string{
			`glovebox.toml:2: http.cors_origins: "https://app.example.com/" is not an origin: an origin is scheme://host[:port], with no user, path, query or fragment (https://app.example.com)`,
			`glovebox.toml:2: http.cors_origins: "HTTPS://B.example" is not an origin as a browser sends it: write it in lower case ("https://b.example")`,
			`glovebox.toml:2: http.cors_origins: "*" allows every origin; list it alone`}},
		{"env required type", "[env.A]\nrequired = \"yes\"\n", []string{`glovebox.toml:2: env.A.required: want true or false, got the string "yes"`}},
		{"env multi-line default", "[env.A]\ndefault = \"a\\nb\"\n", []string{`glovebox.toml:2: env.A.default: a default must be one line`}},
		{"bad size", "[[storage.outputs]]\nuse = \"inline\"\nbelow = \"1MiB\"\n[[storage.outputs]]\nuse = \"localServer\"\n", []string{`glovebox.toml:3: storage.outputs[0].below: size "1MiB" has unit "MiB": want B, KB, MB or GB`}},
		{"bad ttl", "[[storage.outputs]]\nuse = \"localServer\"\nttl = \"forever\"\n", []string{`glovebox.toml:3: storage.outputs[0].ttl: duration "forever"`}},
		{"second rule line", "[[storage.outputs]]\nuse = \"inline\"\nbelow = \"1MB\"\n\n[[storage.outputs]]\nuse = \"localServer\"\nttll = \"1h\"\n", []string{`glovebox.toml:7: storage.outputs[1].ttll: unknown key "ttll" (did you mean "ttl"?)`}},
		{"outputs to url", "[[storage.outputs]]\nuse = \"url\"\n", []string{`glovebox.toml:2: storage.outputs[0].use: outputs may not use adapter "url": it is read-only`}},
		{"no terminal", "[[storage.outputs]]\nuse = \"inline\"\nbelow = \"1MB\"\n", []string{`glovebox.toml:1: storage.outputs: outputs need a terminal rule`}},
		{"s3 without bucket", "[[storage.outputs]]\nuse = \"s3\"\n", []string{`storage.outputs[0]: use = "s3" needs a bucket`}},
		{"ttl on inline", "[[storage.outputs]]\nuse = \"inline\"\nttl = \"1h\"\n", []string{`glovebox.toml:3: storage.outputs[0].ttl: ttl is only for use = "localServer"`}},
		{"options ttl", "[[storage.outputs]]\nuse = \"localServer\"\noptions = { ttl = \"soon\" }\n", []string{`glovebox.toml:1: storage.outputs[0]: (localServer): options.ttl: duration "soon"`}},
		{"storage not array", "[storage.outputs]\nuse = \"inline\"\n", []string{`storage.outputs: want one or more rules`}},
		{"bad limits", "[limits]\ntimeout = \"5x\"\nmemory = \"lots\"\ncpu = \"two\"\nmax_message = \"1TB\"\n", []string{
			`glovebox.toml:2: limits.timeout: duration "5x"`,
			`glovebox.toml:3: limits.memory: memory "lots"`,
			`glovebox.toml:4: limits.cpu: "two" is not a CPU count`,
			`glovebox.toml:5: limits.max_message: size "1TB"`}},
		{"cpu out of range", "[limits]\ncpu = 1000\n", []string{`glovebox.toml:2: limits.cpu: "1000" is not a CPU count`}},
		{"cpu zero", "[limits]\ncpu = \"0\"\n", []string{`glovebox.toml:2: limits.cpu: "0" is not a CPU count`}},
		{"fs relative", "[fs.work]\npath = \"work\"\nwritable = true\n", []string{`glovebox.toml:2: fs.work.path: "work" must be a clean absolute path`}},
		{"fs read-only work", "[fs.work]\npath = \"/work\"\n", []string{`glovebox.toml:1: fs.work: the work mount must be writable`}},
		{"sessions", "[sessions]\nmax = -1\nresume_grace = \"0s\"\n", []string{`glovebox.toml:2: sessions.max: -1 is out of range`, `glovebox.toml:3: sessions.resume_grace`}},
		{"snapshots", "[snapshots]\nstore = \"disk\"\nmax_size = \"lots\"\nmax_snapshots = 0\n", []string{`glovebox.toml:2: snapshots.store: "disk"`, `glovebox.toml:3: snapshots.max_size`, `glovebox.toml:4: snapshots.max_snapshots: 0`}},
		{"persist with replicas", "[sessions]\npersist = true\n[deploy.kubernetes]\nreplicas = 2\n", []string{`deploy.kubernetes.replicas: 2 replicas with sessions.persist`}},
		{"sessions pause and lifetime", "[sessions]\npause = \"soon\"\nlifetime = \"0s\"\n", []string{`glovebox.toml:2: sessions.pause`, `glovebox.toml:3: sessions.lifetime`}},
		{"agent type", "[agent]\ntype = \"python\"\n", []string{`glovebox.toml:2: agent.type: "python" is not an agent type: use exec, acp or go`}},
		{"acp without command", "[agent]\ntype = \"acp\"\n", []string{`glovebox.toml:1: agent: type = "acp" needs a command`}},
		{"exec with command", "[agent]\ncommand = [\"x\"]\n", []string{`glovebox.toml:2: agent.command: command is only for type = "acp"`}},
		{"acp env type", "[agent]\ntype = \"acp\"\ncommand = [\"x\"]\nenv = { A = 1 }\n", []string{`glovebox.toml:4: agent.env.A: want a string, got the integer 1`}},
		{"all problems at once", "name = \"Bad\"\nbogus = 1\n[limits]\ntimeout = \"x\"\n", []string{"glovebox.toml:1: name", "glovebox.toml:2: bogus", "glovebox.toml:4: limits.timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("glovebox.toml", []byte(tc.toml))
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want %q", tc.toml, tc.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error is a %T, want *ConfigError: %v", err, err)
			}
			msg := err.Error()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("Parse(%q) = %q, want it to contain %q (in order)", tc.toml, msg, w)
				}
				at += i + len(w)
			}
		})
	}
}

func TestParseFlakeBase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, ref, attr string }{
		{"github:acme/glovebox-bases#ml", "github:acme/glovebox-bases", "ml"},
		{"github:acme/glovebox-bases/v1.2#ml_2", "github:acme/glovebox-bases/v1.2", "ml_2"},
		{"github:acme/bases?ref=main&dir=sub#gpu-small", "github:acme/bases?ref=main&dir=sub", "gpu-small"},
		{"git+https://git.example.com/acme/bases.git?ref=main#ml", "git+https://git.example.com/acme/bases.git?ref=main", "ml"},
		{"https://example.com:8443/bases/v1.tar.gz#ml", "https://example.com:8443/bases/v1.tar.gz", "ml"},
		{"https://example.com/b.zip#ml", "https://example.com/b.zip", "ml"},
		{"path:/srv/glovebox-bases#ml", "path:/srv/glovebox-bases", "ml"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte("base = "+tomlstr(tc.in)+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if c.Base != tc.in || c.BaseFlake != tc.ref || c.BaseAttr != tc.attr {
				t.Errorf("Parse(base = %q) = base %q flake %q attr %q, want %q %q %q", tc.in, c.Base, c.BaseFlake, c.BaseAttr, tc.in, tc.ref, tc.attr)
			}
			if m := c.Manifest("f"); m.Base != tc.in {
				t.Errorf("manifest base = %q, want %q as written", m.Base, tc.in)
			}
		})
	}
	// The built-in names keep v1's prefix and are no flake bases.
	c, err := Parse("glovebox.toml", []byte(`base = "glovebox/media"`))
	if err != nil || c.Base != "media" || c.BaseFlake != "" || c.Manifest("f").Base != "glovebox/media" {
		t.Errorf("Parse(glovebox/media) = %+v, %v", c, err)
	}
}

func TestParseSandbox(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("name = \"s\"\n[limits]\nmemory = \"512MB\"\ndisk = \"2Gi\"\n[sandbox]\nnetwork = false\nrequire = [\"users\", \"mount\"]\npids = 128\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Manifest("fp")
	if sb := m.Sandbox; sb == nil || sb.Network == nil || *sb.Network || sb.Mount != nil || sb.Pids != 128 || len(sb.Require) != 2 {
		t.Errorf("Manifest().Sandbox = %+v", m.Sandbox)
	}
	if m.Sandbox.AllowDegraded {
		t.Errorf("Manifest().Sandbox.AllowDegraded = true without allow_degraded")
	}
	if m.Limits.Disk != "2Gi" {
		t.Errorf("Manifest().Limits.Disk = %q", m.Limits.Disk)
	}
	if err := m.Check(); err != nil {
		t.Errorf("the manifest does not check: %v", err)
	}
}

// TestParseAllowDegraded: [sandbox] allow_degraded reaches the manifest
// as sandbox.allow_degraded, which the kit reads.
func TestParseAllowDegraded(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("name = \"s\"\n[sandbox]\nallow_degraded = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Manifest("fp")
	if err := m.Check(); err != nil {
		t.Fatalf("the manifest does not check: %v", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := protocol.ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Sandbox == nil || !back.Sandbox.AllowDegraded || !strings.Contains(string(data), `"sandbox":{"allow_degraded":true}`) {
		t.Errorf("manifest %s: sandbox = %+v, want allow_degraded true", data, back.Sandbox)
	}
}

// TestScaffoldAllowDegraded: gbx init's commented [sandbox] block,
// uncommented, is the setting.
func TestScaffoldAllowDegraded(t *testing.T) {
	t.Parallel()
	files, err := Scaffold("box")
	if err != nil {
		t.Fatal(err)
	}
	var toml string
	for _, f := range files {
		if f.Name == ConfigFile {
			toml = string(f.Data)
		}
	}
	for _, l := range []string{"# [sandbox]\n", "# allow_degraded = true\n"} {
		if !strings.Contains(toml, l) {
			t.Fatalf("the scaffold has no line %q", l)
		}
		toml = strings.Replace(toml, l, l[2:], 1)
	}
	c, err := Parse(ConfigFile, []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox == nil || !c.Sandbox.AllowDegraded {
		t.Errorf("uncommented, the scaffold's sandbox = %+v", c.Sandbox)
	}
}

func TestParseInputs(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("[inputs]\nallow_private_urls = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if in := c.Manifest("fp").Inputs; in == nil || !in.AllowPrivateURLs || in.AllowLoopbackURLs {
		t.Errorf("Manifest().Inputs = %+v, want private urls allowed, loopback not", in)
	}
	if c, err := Parse("glovebox.toml", []byte("name = \"x\"\n")); err != nil || c.Manifest("fp").Inputs != nil {
		t.Errorf("no [inputs]: Inputs = %+v, %v; want nil", c.Manifest("fp").Inputs, err)
	}
}

func TestParseHTTP(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("[http]\ncors_origins = [\"https://app.example.com\", \"http://localhost:3000\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Manifest("fp")
	if m.HTTP == nil || !slices.Equal(m.HTTP.CORSOrigins, []string{"https://app.example.com", "http://localhost:3000"}) {
		t.Errorf("Manifest().HTTP = %+v, want the two origins", m.HTTP)
	}
	if err := m.Check(); err != nil {
		t.Errorf("the manifest does not check: %v", err)
	}
}

func TestParseConnectionLimits(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("name = \"s\"\n[limits]\nmax_connections = 512\nframe_budget = \"64MB\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Manifest("fp")
	if m.Limits.MaxConnections != 512 || m.Limits.FrameBudget != "64MB" {
		t.Errorf("Manifest().Limits max_connections %d, frame_budget %q; want 512, 64MB", m.Limits.MaxConnections, m.Limits.FrameBudget)
	}
	if err := m.Check(); err != nil {
		t.Errorf("the manifest does not check: %v", err)
	}
	for _, in := range []string{"max_connections = -1", `max_connections = "many"`, `frame_budget = "lots"`} {
		if _, err := Parse("glovebox.toml", []byte("[limits]\n"+in+"\n")); err == nil || !strings.Contains(err.Error(), "glovebox.toml:2: limits.") {
			t.Errorf("Parse(%q) = %v, want an error at glovebox.toml:2", in, err)
		}
	}
}

func TestParseNumericCPU(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"cpu = 2": "2", "cpu = 0.5": "0.5", `cpu = "4"`: "4"} {
		c, err := Parse("glovebox.toml", []byte("[limits]\n"+in+"\n"))
		if err != nil || c.Limits.CPU != want {
			t.Errorf("Parse(%q) cpu = %q, %v; want %q", in, c.Limits.CPU, err, want)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "gbx init") {
		t.Errorf("Load(empty dir) = %v, want a hint to run gbx init", err)
	}
	file := filepath.Join(dir, ConfigFile)
	if err := os.WriteFile(file, []byte("name = \"ok\"\nbad = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.HasPrefix(err.Error(), file+":2: bad:") {
		t.Errorf("Load = %v, want an error starting with %s:2", err, file)
	}
}

func TestScaffoldParsesAndGenerates(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"My Agent!", "", "---", strings.Repeat("x", 100), "ok-name"} {
		files, err := Scaffold(in)
		if err != nil {
			t.Fatal(err)
		}
		var toml []byte
		for _, f := range files {
			if f.Name == ConfigFile {
				toml = f.Data
			}
		}
		c, err := Parse(ConfigFile, toml)
		if err != nil {
			t.Fatalf("scaffold for %q does not parse: %v", in, err)
		}
		if !protocol.NameRE.MatchString(c.Name) || c.Agent.Type != protocol.AgentExec {
			t.Errorf("scaffold for %q: name %q agent %q", in, c.Name, c.Agent.Type)
		}
		if _, err := Generate(c, Options{Key: testKey}); err != nil {
			t.Errorf("scaffold for %q does not generate: %v", in, err)
		}
	}
	if got := BoxName("My Agent!"); got != "my-agent" {
		t.Errorf("BoxName(%q) = %q, want my-agent", "My Agent!", got)
	}
}

func FuzzParse(f *testing.F) {
	entries, _ := filepath.Glob("testdata/*/glovebox.toml")
	for _, e := range entries {
		if data, err := os.ReadFile(e); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("[[storage.outputs]]\nuse = \"inline\"\n[storage.outputs.x]\n"))
	f.Add([]byte("a.b.c = 1\n[a]\n[[x.y]]\n[x.y.z]\nq = {r = [1, {s = 2}]}\n"))
	f.Add([]byte("[network]\nallow = [\"a.com\", { host = \"b.com\", methods = [\"GET\"], paths = [\"/x/\"] }]\nsession_may_allow = [\"c.com\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.toml", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("Parse error %T without problems: %v", err, err)
			}
			return
		}
		// Whatever parses must generate and give a manifest that passes
		// the kit's own check.
		if _, err := Generate(c, Options{Key: testKey, NpmLock: fakeNpmLock(c)}); err != nil {
			t.Fatalf("Parse accepted a config Generate refuses: %v\n%s", err, data)
		}
	})
}

// TestStorageAdapterNames: adapter names the kit does not have fail at
// generate time, at their line, with the nearest name; gcs and azure are
// refused with what to use; a Go agent may name its own.
func TestStorageAdapterNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, toml, want string }{
		{"typo", "[[storage.outputs]]\nuse = \"s4\"\nbucket = \"b\"\n", `glovebox.toml:2: storage.outputs[0].use: "s4" is not a storage adapter (did you mean "s3"?)`},
		{"case", "[[storage.outputs]]\nuse = \"localserver\"\n", `(did you mean "localServer"?)`},
		{"gcs", "[[storage.outputs]]\nuse = \"gcs\"\nbucket = \"b\"\n", `"gcs" is not implemented by the kit: use "s3"`},
		{"azure input", "[[storage.inputs]]\nuse = \"azure\"\n", `"azure" is not implemented by the kit`},
		{"custom", "[[storage.outputs]]\nuse = \"vault\"\n", `"vault" is not a storage adapter: use inline, localServer or s3 (url for inputs); a custom adapter needs a Go agent`},
		{"custom with a Go agent", "[agent]\ntype = \"go\"\nmain = \"./cmd/a\"\n[[storage.outputs]]\nuse = \"vault\"\n", ""},
		{"s3", "[[storage.outputs]]\nuse = \"s3\"\nbucket = \"b\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("glovebox.toml", []byte(tc.toml))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Parse = %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestGoAgentKeys: a Go agent names its main package; the keys are only
// for type "go" and are checked.
func TestGoAgentKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, toml, want string }{
		{"no main", "[agent]\ntype = \"go\"\n", `type = "go" needs main`},
		{"escapes", "[agent]\ntype = \"go\"\nmain = \"./../x\"\n", `is not a main package inside the box directory`},
		{"absolute", "[agent]\ntype = \"go\"\nmain = \"/src/x\"\n", `is not a main package inside the box directory`},
		{"not go", "[agent]\nmain = \"./x\"\n", `main is only for type = "go"`},
		{"bad hash", "[agent]\ntype = \"go\"\nmain = \"./x\"\nvendor_hash = \"abc\"\n", `is not an SRI sha256 hash`},
		{"good", "[agent]\ntype = \"go\"\nmain = \"./cmd/my-agent\"\nvendor_hash = \"sha256-" + strings.Repeat("A", 43) + "=\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte(tc.toml))
			switch {
			case tc.want == "" && (err != nil || c.AgentMain != "./cmd/my-agent"):
				t.Errorf("Parse = %v, %v; want main ./cmd/my-agent", c, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestAgentWarm: [agent] warm sizes the warm pool; it is checked and
// reaches the manifest only when given.
func TestAgentWarm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml, want string
		warm             *int
	}{
		{"default", "[agent]\ntype = \"exec\"\n", "", nil},
		{"off", "[agent]\nwarm = 0\n", "", new(0)},
		{"three", "[agent]\ntype = \"acp\"\ncommand = [\"a\"]\nwarm = 3\n", "", new(3)},
		{"negative", "[agent]\nwarm = -1\n", "agent.warm", nil},
		{"too many", "[agent]\nwarm = 65\n", "use 0 (off) to 64", nil},
		{"not a number", "[agent]\nwarm = \"2\"\n", "agent.warm", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte(tc.toml))
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Parse = %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse = %v, want no error", err)
			}
			if diff := cmp.Diff(tc.warm, c.Agent.Warm); diff != "" {
				t.Errorf("Agent.Warm (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRuns(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("[runs]\nrecord_text = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(c, Options{Key: testKey, KitVersion: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := protocol.ParseManifest(fileData(t, res, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := (protocol.RunsSpec{PublicKey: protocol.RunPublicKey(testKey), RecordText: true}); m.Runs == nil || *m.Runs != want {
		t.Errorf("the manifest's runs = %+v, want %+v", m.Runs, want)
	}
	// A check without the key keeps the committed manifest's public key.
	check, err := Generate(c, Options{Fingerprint: protocol.Fingerprint(testKey), RunsPublicKey: m.Runs.PublicKey, KitVersion: "v0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(fileData(t, check, ManifestFile)), string(fileData(t, res, ManifestFile)); got != want {
		t.Errorf("generated from the fingerprint and public key:\n%s\nwant the same as from the key:\n%s", got, want)
	}
	if _, err := Parse("glovebox.toml", []byte("[runs]\nrecord_txt = true\n")); err == nil || !strings.Contains(err.Error(), "record_txt") {
		t.Errorf("an unknown [runs] key = %v, want it named", err)
	}
}
