package generator

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestPresets(t *testing.T) {
	t.Parallel()
	if len(Presets) < 5 {
		t.Fatalf("presets %v, want claude-code, codex, gemini, opencode and goose at least", PresetNames())
	}
	for _, name := range PresetNames() {
		t.Run(name, func(t *testing.T) {
			p := Presets[name]
			c, err := Parse("glovebox.toml", []byte("name = \"box\"\n[agent]\npreset = \""+name+"\"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings %q: a preset names only packages the pinned nixpkgs is known to have", c.Warnings)
			}
			if c.Agent.Type != protocol.AgentACP || len(c.Agent.Command) == 0 || c.Agent.Command[0] != p.Bin {
				t.Errorf("agent %+v, want an ACP agent running %s", c.Agent, p.Bin)
			}
			e, ok := c.Env[p.Secret]
			if !ok || !e.Secret || !e.Required || e.Inject == nil || !slices.Equal(e.Inject.Hosts, []string{p.Host}) {
				t.Errorf("env %s = %+v, want a required secret brokered to %s", p.Secret, e, p.Host)
			}
			if n := c.Network; n == nil || n.Default != protocol.NetworkDeny || !slices.Equal(n.Allow, []string{p.Host + ":443"}) {
				t.Errorf("network %+v, want deny but %s:443", n, p.Host)
			}
			if c.Limits.Memory == "" || c.Limits.Timeout == "" {
				t.Errorf("limits %+v, want memory and timeout", c.Limits)
			}
			if len(c.Packages.Npm)+len(c.Packages.Nix) != 1 {
				t.Errorf("packages %+v, want the agent's one package", c.Packages)
			}
			if err := c.Manifest(protocol.Fingerprint(testKey)).Check(); err != nil {
				t.Errorf("manifest: %v", err)
			}
		})
	}
}

func TestPresetOverrides(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`name = "box"
[packages]
npm = ["@zed-industries/claude-code-acp@0.16.1", "cowsay"]
nix = ["ripgrep"]

[agent]
preset = "claude-code"
command = ["claude-code-acp", "--verbose"]
env = { A = "b" }
warm = 2

[env.ANTHROPIC_API_KEY]
secret = true
inject = { hosts = ["llm.internal.example"] }

[network]
allow = ["llm.internal.example:443"]

[limits]
timeout = "5m"
`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"@zed-industries/claude-code-acp@0.16.1", "cowsay"}, c.Packages.Npm); diff != "" {
		t.Errorf("npm: the box's version replaces the preset's (-want +got):\n%s", diff)
	}
	if !slices.Equal(c.Packages.Nix, []string{"ripgrep"}) {
		t.Errorf("nix = %v", c.Packages.Nix)
	}
	if !slices.Equal(c.Agent.Command, []string{"claude-code-acp", "--verbose"}) || c.Agent.Warm == nil || *c.Agent.Warm != 2 {
		t.Errorf("agent %+v", c.Agent)
	}
	// A table set in the box replaces the preset's value key by key: env
	// is the box's whole inline table.
	if diff := cmp.Diff(map[string]string{"A": "b", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}, c.Agent.Env); diff != "" {
		t.Errorf("agent env (-want +got):\n%s", diff)
	}
	e := c.Env["ANTHROPIC_API_KEY"]
	if !e.Required || e.Inject == nil || !slices.Equal(e.Inject.Hosts, []string{"llm.internal.example"}) || e.Inject.Header != "x-api-key" {
		t.Errorf("ANTHROPIC_API_KEY = %+v, want the box's hosts with the preset's header and required", e)
	}
	if c.Network.Default != protocol.NetworkDeny || !slices.Equal(c.Network.Allow, []string{"llm.internal.example:443"}) {
		t.Errorf("network %+v", c.Network)
	}
	if c.Limits.Timeout != "5m" || c.Limits.Memory != "2Gi" {
		t.Errorf("limits %+v", c.Limits)
	}
}

func TestPresetErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ toml, want string }{
		{"[agent]\npreset = \"claude-cod\"\n", `glovebox.toml:2: agent.preset: "claude-cod" is not an agent preset: use one of claude-code, codex, gemini, goose, opencode (did you mean "claude-code"?)`},
		{"[agent]\npreset = 3\n", `glovebox.toml:2: agent.preset: want a preset name (one of claude-code, codex, gemini, goose, opencode), got the integer 3`},
		{"[agent]\npreset = \"codex\"\ntype = \"exec\"\n", `glovebox.toml:3: agent.type: preset "codex" is an ACP agent`},
		{"[agent]\npreset = \"codex\"\n[network]\nallow = [\"example.com\"]\n", `env.OPENAI_API_KEY.inject.hosts[0]`},
	} {
		_, err := Parse("glovebox.toml", []byte(tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.toml, err, tc.want)
		}
	}
}

// TestPresetLocks locks every npm preset's package from the npm registry
// and evaluates its box's flake against the stand-in nixpkgs: the lock
// names every package with a URL and an integrity hash, it installs the
// preset's program, and importNpmLock takes it.
func TestPresetLocks(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	s := nixtest.StandInNixpkgs(t)
	root := nixtest.RepoCopy(t)
	for _, name := range PresetNames() {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte("name = \"box\"\n[agent]\npreset = \""+name+"\"\n"))
			if err != nil {
				t.Fatal(err)
			}
			var lock []byte
			if len(c.Packages.Npm) > 0 {
				lock, err = ResolveNpm(context.Background(), c, nil)
				if err != nil {
					needRegistry(t, err)
				}
				if bins := NpmBins(lock, c); !slices.Contains(bins, Presets[name].Bin) {
					t.Errorf("the lock's packages install %v, want %s", bins, Presets[name].Bin)
				}
				// Kept as long as the packages are the same.
				again, err := ResolveNpm(context.Background(), c, lock)
				if err != nil || string(again) != string(lock) {
					t.Errorf("ResolveNpm with its own lock = %v, want it kept", err)
				}
			}
			res, err := Generate(c, Options{Key: testKey, KitVersion: "v0.1.0", Nixpkgs: standInPin(s), NpmLock: lock})
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			if _, err := Write(out, res.Files); err != nil {
				t.Fatal(err)
			}
			var images map[string]imageInfo
			nixtest.EvalJSON(t, &images, "--no-write-lock-file", "--override-input", "glovebox", "path:"+root, "path:"+out+"#packages", "--apply", imageApply)
			for _, system := range nixtest.Systems {
				checkImage(t, system, c, res, images[system], fileData(t, res, ManifestFile))
			}
		})
	}
}

func TestNpmLockChecked(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("[packages]\nnpm = [\"cowsay@1.6.0\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	good := `{"lockfileVersion":3,"packages":{"":{"dependencies":{"cowsay":"1.6.0"}},"node_modules/cowsay":{"version":"1.6.0","resolved":"https://registry.npmjs.org/cowsay/-/cowsay-1.6.0.tgz","integrity":"sha512-AAAA"}}}`
	if err := CheckNpmLock(c, []byte(good)); err != nil {
		t.Fatalf("a good lock: %v", err)
	}
	// Dependencies are found as node finds them: nested, then hoisted.
	nested := strings.Replace(good, `"integrity":"sha512-AAAA"}`, `"integrity":"sha512-AAAA","dependencies":{"a":"1","b":"1"}},`+
		`"node_modules/cowsay/node_modules/a":{"resolved":"https://r/a.tgz","integrity":"sha512-AAAA","dependencies":{"b":"1"}},`+
		`"node_modules/b":{"resolved":"https://r/b.tgz","integrity":"sha512-AAAA"}`, 1)
	if err := CheckNpmLock(c, []byte(nested)); err != nil {
		t.Fatalf("a nested lock: %v", err)
	}
	for _, tc := range []struct{ lock, want string }{
		{`{"lockfileVersion":1,"dependencies":{}}`, "lockfileVersion 1"},
		{`{"lockfileVersion":3,"packages":{"":{"dependencies":{"cowsay":"1.5.0"}}}}`, "is for [cowsay@1.5.0], not for [packages] npm [cowsay@1.6.0]"},
		{strings.Replace(good, `"resolved":"https://registry.npmjs.org/cowsay/-/cowsay-1.6.0.tgz",`, "", 1), "node_modules/cowsay has no https registry URL"},
		{strings.Replace(good, `"integrity":"sha512-AAAA"`, `"integrity":""`, 1), "node_modules/cowsay has no integrity hash"},
		{strings.Replace(good, `"node_modules/cowsay"`, `"../elsewhere"`, 1), "is not under node_modules/"},
		{`not json`, "is not a package-lock.json"},
		{strings.Replace(good, `"integrity":"sha512-AAAA"`, `"integrity":"sha512-AAAA","optionalDependencies":{"cowsay-linux-arm64":"1.6.0"}`, 1),
			"node_modules/cowsay depends on cowsay-linux-arm64@1.6.0, which the lock lacks"},
	} {
		if err := CheckNpmLock(c, []byte(tc.lock)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckNpmLock(%s) = %v, want %q", tc.lock, err, tc.want)
		}
	}
	// Generate refuses to write a box whose lock is missing or stale.
	for _, lock := range [][]byte{nil, []byte(strings.Replace(good, "1.6.0", "1.5.0", -1))} {
		if _, err := Generate(c, Options{Key: testKey, NpmLock: lock}); err == nil || !strings.Contains(err.Error(), ErrNpmUnresolved.Error()) {
			t.Errorf("Generate with lock %q = %v, want %v", lock, err, ErrNpmUnresolved)
		}
	}
	if _, err := os.Stat(filepath.Join("testdata", "agentpreset", "dist", NpmLockFile)); err != nil {
		t.Errorf("the agentpreset golden box has no committed npm lock: %v", err)
	}
}

// fakeNpmLock is a lock for c's npm packages that passes CheckNpmLock,
// made offline (its URLs and hashes are not real): for tests of what
// Generate does with a lock, not of the lock.
func fakeNpmLock(c *Config) []byte {
	if len(c.Packages.Npm) == 0 {
		return nil
	}
	deps := npmDeps(c.Packages.Npm)
	pkgs := map[string]any{"": map[string]any{"dependencies": deps}}
	for name := range deps {
		pkgs["node_modules/"+name] = map[string]any{
			"version":   "1.0.0",
			"resolved":  "https://registry.npmjs.org/" + name + "/-/x-1.0.0.tgz",
			"integrity": "sha512-AAAA",
		}
	}
	b, _ := marshalJSON(map[string]any{"lockfileVersion": 3, "packages": pkgs})
	return b
}

// FuzzCheckNpmLock: any bytes in dist/npm/package-lock.json get an error
// or pass, never a panic or a hang.
func FuzzCheckNpmLock(f *testing.F) {
	for _, dir := range []string{"media"} {
		if data, err := os.ReadFile(filepath.Join("testdata", dir, "dist", NpmLockFile)); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"lockfileVersion":3,"packages":{"":{"dependencies":{"cowsay":"*"}},"node_modules/a/node_modules/b/node_modules/":{"dependencies":{"x":"1"}}}}`))
	c, err := Parse("glovebox.toml", []byte("[packages]\nnpm = [\"cowsay\"]\n"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, lock []byte) {
		if err := CheckNpmLock(c, lock); err == nil {
			if _, err := Generate(c, Options{Key: testKey, NpmLock: lock}); err != nil {
				t.Fatalf("CheckNpmLock passed a lock Generate refuses: %v", err)
			}
		}
	})
}

// TestScaffoldAgent: gbx init --agent NAME writes a glovebox.toml with the
// preset that parses without warnings and generates; an unknown name is
// refused with the nearest.
func TestScaffoldAgent(t *testing.T) {
	t.Parallel()
	for _, name := range PresetNames() {
		files, err := ScaffoldAgent("my box", name)
		if err != nil {
			t.Fatal(err)
		}
		var toml []byte
		for _, f := range files {
			if f.Name == ConfigFile {
				toml = f.Data
			}
		}
		if !strings.Contains(string(toml), "preset = \""+name+"\"") {
			t.Errorf("%s: glovebox.toml does not name the preset:\n%s", name, toml)
		}
		c, err := Parse(ConfigFile, toml)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, toml)
		}
		if c.Agent.Type != "acp" || c.Agent.Command[0] != Presets[name].Bin || c.Limits.Timeout != "30m" {
			t.Errorf("%s: agent %+v, limits %+v", name, c.Agent, c.Limits)
		}
		if _, err := Generate(c, Options{Key: testKey, NpmLock: fakeNpmLock(c)}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ScaffoldAgent("x", "claud-code"); err == nil || !strings.Contains(err.Error(), `did you mean "claude-code"`) {
		t.Errorf("ScaffoldAgent(claud-code) = %v", err)
	}
}
