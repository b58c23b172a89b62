package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/generator"
	"github.com/glovebox-dev/glovebox/protocol"
)

// gbx runs the command line in dir and returns stdout, stderr and the error.
func gbx(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := execute(context.Background(), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Dir: dir}, args)
	return out.String(), errb.String(), err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInitThenGenerate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "My Box")
	out, _, err := gbx(t, filepath.Dir(dir), "init", "My Box")
	if err != nil {
		t.Fatalf("gbx init: %v", err)
	}
	if !strings.Contains(out, "wrote My Box/glovebox.toml") {
		t.Errorf("gbx init printed %q", out)
	}
	cfg, err := generator.Load(dir)
	if err != nil {
		t.Fatalf("the scaffolded config does not load: %v", err)
	}
	if cfg.Name != "my-box" || cfg.Agent.Type != protocol.AgentExec {
		t.Errorf("scaffold: name %q agent %q, want my-box exec", cfg.Name, cfg.Agent.Type)
	}

	initRefusesToOverwrite(t, dir)
	key := generateNewKey(t, dir)
	dist := filepath.Join(dir, "dist")
	fp := protocol.Fingerprint(key)

	// Again: nothing changes, the key is kept.
	out, _, err = gbx(t, dir, "generate")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "dist is up to date") || !strings.Contains(out, "box key kept: fingerprint "+fp) {
		t.Errorf("second gbx generate printed %q", out)
	}

	generateCheckDrift(t, dir)

	// --rotate-key: a new key and fingerprint, everywhere.
	out, _, err = gbx(t, dir, "generate", "--rotate-key")
	if err != nil {
		t.Fatal(err)
	}
	key2 := strings.TrimSpace(readFile(t, filepath.Join(dist, "glovebox.key")))
	if key2 == key || !strings.Contains(out, "rotated the box key: fingerprint "+protocol.Fingerprint(key2)) {
		t.Errorf("--rotate-key: key changed %v, output %q", key2 != key, out)
	}
	if !strings.Contains(readFile(t, filepath.Join(dist, "glovebox.json")), protocol.Fingerprint(key2)) {
		t.Error("the manifest does not carry the rotated key's fingerprint")
	}
}

// initRefusesToOverwrite: init refuses to overwrite, and writes nothing;
// --force rewrites.
func initRefusesToOverwrite(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "glovebox.toml"), []byte("name = \"mine\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "README.md"))
	_, _, err := gbx(t, dir, "init")
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("gbx init over an existing box = %v, want a refusal naming --force", err)
	}
	if got := readFile(t, filepath.Join(dir, "glovebox.toml")); got != "name = \"mine\"\n" {
		t.Errorf("init overwrote glovebox.toml: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err == nil {
		t.Error("a refused init still wrote README.md")
	}
	if _, _, err := gbx(t, dir, "init", "--force", "--name", "forced"); err != nil {
		t.Fatalf("gbx init --force: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "glovebox.toml")); !strings.Contains(got, `name = "forced"`) {
		t.Errorf("init --force did not rewrite glovebox.toml:\n%s", got)
	}
}

// generateNewKey: the first generate makes a new key, 0600, its
// fingerprint printed and in the manifest, and the box's files; it
// returns the key.
func generateNewKey(t *testing.T, dir string) string {
	t.Helper()
	out, _, err := gbx(t, dir, "generate")
	if err != nil {
		t.Fatalf("gbx generate: %v", err)
	}
	dist := filepath.Join(dir, "dist")
	key := strings.TrimSpace(readFile(t, filepath.Join(dist, "glovebox.key")))
	fp := protocol.Fingerprint(key)
	if !strings.Contains(out, "new box key: fingerprint "+fp) {
		t.Errorf("gbx generate printed %q, want the new key's fingerprint %s", out, fp)
	}
	if st, _ := os.Stat(filepath.Join(dist, "glovebox.key")); st.Mode().Perm() != 0o600 {
		t.Errorf("glovebox.key mode %v, want 0600", st.Mode())
	}
	m, err := protocol.ParseManifest([]byte(readFile(t, filepath.Join(dist, "glovebox.json"))))
	if err != nil || m.KeyFingerprint != fp {
		t.Errorf("manifest fingerprint %q, %v; want %s", m.KeyFingerprint, err, fp)
	}
	for _, f := range []string{"flake.nix", "flake.lock", "nixpacks.toml", ".env.example", "fly.toml", "Dockerfile", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(dist, f)); err != nil {
			t.Errorf("dist lacks %s", f)
		}
	}
	if !strings.Contains(readFile(t, filepath.Join(dist, ".gitignore")), "/glovebox.key") {
		t.Error("dist/.gitignore does not keep the key out of git")
	}
	return key
}

// generateCheckDrift: --check is clean, then reports drift after an
// edit, without writing.
func generateCheckDrift(t *testing.T, dir string) {
	t.Helper()
	dist := filepath.Join(dir, "dist")
	if out, _, err := gbx(t, dir, "generate", "--check"); err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("gbx generate --check on a fresh dist = %q, %v", out, err)
	}
	cfgFile := filepath.Join(dir, "glovebox.toml")
	toml := readFile(t, cfgFile)
	if err := os.WriteFile(cfgFile, []byte(strings.Replace(toml, `nix = ["jq"]`, `nix = ["jq", "ripgrep"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, filepath.Join(dist, "flake.nix"))
	out, _, err := gbx(t, dir, "generate", "--check")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 1 {
		t.Fatalf("gbx generate --check with drift = %v, want exit 1", err)
	}
	for _, want := range []string{"dist/flake.nix: differs", `+          packages = [ "jq" "ripgrep" ];`, "dist/nixpacks.toml: differs", "dist/glovebox.json: differs", "3 file(s) differ"} {
		if !strings.Contains(out, want) {
			t.Errorf("--check output lacks %q:\n%s", want, out)
		}
	}
	if readFile(t, filepath.Join(dist, "flake.nix")) != before {
		t.Error("--check wrote flake.nix")
	}
}

func TestGenerateOutAndErrors(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	box := filepath.Join(root, "box")
	if err := os.MkdirAll(box, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(box, "glovebox.toml"), []byte("name = \"b\"\n[packages]\nnix = [\"jq\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := gbx(t, root, "generate", "box", "--out", "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "wrote elsewhere/flake.nix") {
		t.Errorf("--out: printed %q", out)
	}

	// Bad config: every problem with file and line, nothing written.
	if err := os.WriteFile(filepath.Join(box, "glovebox.toml"), []byte("name = \"B\"\n\nbase = \"ubuntu\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = gbx(t, root, "generate", "box", "--out", "bad")
	if err == nil {
		t.Fatal("generate with a bad config succeeded")
	}
	file := filepath.Join(box, "glovebox.toml")
	if !regexp.MustCompile(regexp.QuoteMeta(file) + `:1: name: .*\n` + regexp.QuoteMeta(file) + `:3: base: `).MatchString(err.Error()) {
		t.Errorf("error = %q, want both problems with file:line", err)
	}
	if _, err := os.Stat(filepath.Join(root, "bad")); err == nil {
		t.Error("a failed generate created its output directory")
	}

	for _, args := range [][]string{
		{"generate", "--check", "--rotate-key"},
		{"generate", "a", "b"},
		{"generate", "--bogus"},
		{"init", "a", "b"},
	} {
		if _, _, err := gbx(t, box, args...); !errors.Is(err, ErrUsage) {
			t.Errorf("gbx %v = %v, want a usage error", args, err)
		}
	}
	if _, _, err := gbx(t, t.TempDir(), "generate"); err == nil || !strings.Contains(err.Error(), "gbx init") {
		t.Errorf("generate without a config = %v, want a hint to run gbx init", err)
	}
}

func TestGenerateCheckMissingKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, _, err := gbx(t, dir, "init"); err != nil {
		t.Fatal(err)
	}
	out, _, err := gbx(t, dir, "generate", "--check")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 1 || !strings.Contains(out, "dist/glovebox.key: missing") {
		t.Errorf("--check without dist = %q, %v; want every file missing and exit 1", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dist")); err == nil {
		t.Error("--check created dist")
	}
}

// TestGenerateSameBytesAnywhere generates one box in two places, called
// from two different working directories, with the same key: every file
// must have the same bytes.
func TestGenerateSameBytesAnywhere(t *testing.T) {
	t.Parallel()
	toml := readFile(t, filepath.Join("..", "..", "generator", "testdata", "media", "glovebox.toml"))
	key := protocol.NewKey()
	var dists []string
	for i, wd := range []string{t.TempDir(), t.TempDir()} {
		box := filepath.Join(wd, "deep", strings.Repeat("x", i+1), "box")
		if err := os.MkdirAll(filepath.Join(box, "dist"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(box, "glovebox.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(box, "dist", "glovebox.key"), []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The golden box's npm lock, which generate keeps: no registry.
		if err := os.CopyFS(filepath.Join(box, "dist", "npm"), os.DirFS(filepath.Join("..", "..", "generator", "testdata", "media", "dist", "npm"))); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(wd, box)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := gbx(t, wd, "generate", rel); err != nil {
			t.Fatal(err)
		}
		dists = append(dists, filepath.Join(box, "dist"))
	}
	var names []string
	err := filepath.WalkDir(dists[0], func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dists[0], p)
			names = append(names, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 {
		t.Fatalf("dist holds %d files, want at least 10", len(names))
	}
	for _, name := range names {
		a, b := readFile(t, filepath.Join(dists[0], name)), readFile(t, filepath.Join(dists[1], name))
		if a != b {
			t.Errorf("%s differs between the two places", name)
		}
		if strings.Contains(a, dists[0]) || strings.Contains(a, "deep/") {
			t.Errorf("%s contains a machine path", name)
		}
	}
}

// gbxEnv runs the command line in dir with the environment env.
func gbxEnv(t *testing.T, dir string, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := execute(context.Background(), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }, Dir: dir}, args)
	return out.String(), errb.String(), err
}

// git runs git in dir with a fixed identity and no user configuration.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	path, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not on PATH")
	}
	cmd := exec.CommandContext(t.Context(), path, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestGenerateCleanClone commits a generated box to git and works in a
// fresh clone, which has no glovebox.key (it is git-ignored): --check
// compares with the committed fingerprint and passes, generate refuses to
// make a new key the deployed box would not accept, and takes the key
// from GLOVEBOX_KEY; any key the kit accepts (a v1 hex key) is taken.
func TestGenerateCleanClone(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	origin, clone := filepath.Join(root, "origin"), filepath.Join(root, "clone")
	if _, _, err := gbx(t, root, "init", "origin"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gbx(t, origin, "generate"); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(readFile(t, filepath.Join(origin, "dist", generator.KeyFile)))
	fp := protocol.Fingerprint(key)
	git(t, origin, "init", "-q")
	git(t, origin, "add", "-A")
	git(t, origin, "commit", "-q", "-m", "box")
	git(t, root, "clone", "-q", origin, clone)
	keyFile := filepath.Join(clone, "dist", generator.KeyFile)
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the clone has %s (%v): it must be git-ignored", keyFile, err)
	}

	out, _, err := gbx(t, clone, "generate", "--check")
	if err != nil || !strings.Contains(out, "dist is up to date") || !strings.Contains(out, fp) {
		t.Errorf("--check in a clean clone = %q, %v; want up to date against fingerprint %s", out, err, fp)
	}

	_, _, err = gbx(t, clone, "generate")
	if err == nil || !strings.Contains(err.Error(), fp) || !strings.Contains(err.Error(), "GLOVEBOX_KEY") {
		t.Errorf("generate without the key = %v; want a refusal naming %s and GLOVEBOX_KEY", err, fp)
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("generate without the key wrote %s", keyFile)
	}

	other := protocol.NewKey()
	if _, _, err := gbxEnv(t, clone, map[string]string{"GLOVEBOX_KEY": other}, "generate"); err == nil || !strings.Contains(err.Error(), fp) {
		t.Errorf("generate with another GLOVEBOX_KEY = %v; want a refusal naming %s", err, fp)
	}
	// --check with the wrong key reports the manifest's drift.
	out, _, err = gbxEnv(t, clone, map[string]string{"GLOVEBOX_KEY": other}, "generate", "--check")
	var exit *ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "glovebox.json: differs") {
		t.Errorf("--check with another key = %q, %v; want glovebox.json to differ", out, err)
	}

	out, _, err = gbxEnv(t, clone, map[string]string{"GLOVEBOX_KEY": key}, "generate")
	if err != nil || !strings.Contains(out, "box key from GLOVEBOX_KEY: fingerprint "+fp) {
		t.Fatalf("generate with GLOVEBOX_KEY = %q, %v", out, err)
	}
	if got := strings.TrimSpace(readFile(t, keyFile)); got != key {
		t.Errorf("glovebox.key = %q, want GLOVEBOX_KEY's key", got)
	}
	if _, _, err := gbxEnv(t, clone, map[string]string{"GLOVEBOX_KEY": other}, "generate"); err == nil || !strings.Contains(err.Error(), "different keys") {
		t.Errorf("GLOVEBOX_KEY and glovebox.key disagreeing = %v; want an error", err)
	}

	// A v1 project's 64-hex key, adopted on purpose.
	hex := strings.Repeat("0123456789abcdef", 4)
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	out, _, err = gbxEnv(t, clone, map[string]string{"GLOVEBOX_KEY": hex}, "generate", "--rotate-key")
	if err != nil || !strings.Contains(out, "rotated the box key: fingerprint "+protocol.Fingerprint(hex)) {
		t.Fatalf("--rotate-key with a hex GLOVEBOX_KEY = %q, %v", out, err)
	}
	if out, _, err := gbx(t, clone, "generate", "--check"); err != nil {
		t.Errorf("--check after adopting a hex key = %q, %v", out, err)
	}
	if _, _, err := gbxEnv(t, clone, map[string]string{"GLOVEBOX_KEY": "two\nlines"}, "generate", "--rotate-key"); err == nil || !strings.Contains(err.Error(), "GLOVEBOX_KEY") {
		t.Errorf("a two-line GLOVEBOX_KEY = %v; want an error naming GLOVEBOX_KEY", err)
	}
}

// TestKitVersion: a release gbx pins its own tag; a development build or a
// Go pseudo-version (no tag a flake can name) floats.
func TestKitVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ version, want string }{
		{"v1.2.3", "v1.2.3"},
		{"v1.2.3-rc.1", "v1.2.3-rc.1"},
		{"v0.0.0-20261124030405-abcdef123456", "latest"},
		{"dev", "latest"},
		{"v1.2", "latest"},
	} {
		if got := kitVersionOf(tc.version, ""); got != tc.want {
			t.Errorf("kitVersion() with Version %q = %q, want %q", tc.version, got, tc.want)
		}
	}
}

// TestGenerateNpmLock: gbx generate locks [packages] npm from the npm
// registry into dist/npm, keeps that lock while the packages are the
// same, and --check reports a lock that is missing, broken or for other
// packages, without the network.
func TestGenerateNpmLock(t *testing.T) {
	t.Parallel()
	box := t.TempDir()
	write := func(toml string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(box, "glovebox.toml"), []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("name = \"b\"\n[packages]\nnpm = [\"cowsay@1.6.0\"]\n")
	out, _, err := gbx(t, box, "generate")
	if err != nil {
		if strings.Contains(err.Error(), "resolve [packages] npm") {
			msg := fmt.Sprintf("this test locks npm packages from the npm registry, which failed (offline?): %v", err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		t.Fatal(err)
	}
	if !strings.Contains(out, "wrote dist/npm/package-lock.json") || !strings.Contains(out, "wrote dist/npm/package.json") {
		t.Errorf("generate printed %q, want the npm lock written", out)
	}
	lockPath := filepath.Join(box, "dist", "npm", "package-lock.json")
	lock, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lock), `"resolved": "https://registry.npmjs.org/cowsay/-/cowsay-1.6.0.tgz"`) || !strings.Contains(string(lock), `"integrity": "sha512-`) {
		t.Errorf("the lock does not pin cowsay 1.6.0 with its URL and integrity:\n%.600s", lock)
	}
	if out, _, err := gbx(t, box, "generate", "--check"); err != nil || !strings.Contains(out, "up to date") {
		t.Errorf("--check after generate = %v: %s", err, out)
	}
	// Kept: a second generate writes nothing.
	if out, _, err := gbx(t, box, "generate"); err != nil || strings.Contains(out, "wrote") {
		t.Errorf("second generate = %v: %s", err, out)
	}
	// Another version: --check reports the lock as stale, offline.
	write("name = \"b\"\n[packages]\nnpm = [\"cowsay@1.5.0\"]\n")
	out, _, err = gbx(t, box, "generate", "--check")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 1 || !strings.Contains(out, "dist/npm/package-lock.json: the npm packages are not locked: npm/package-lock.json is for [cowsay@1.6.0], not for [packages] npm [cowsay@1.5.0]") {
		t.Errorf("--check with a stale lock = %v: %q", err, out)
	}
	if err := os.Remove(lockPath); err != nil {
		t.Fatal(err)
	}
	if _, _, err = gbx(t, box, "generate", "--check"); !errors.As(err, &exit) || exit.Code != 1 {
		t.Errorf("--check without a lock = %v, want exit 1", err)
	}
}

// TestInitAgent: gbx init --agent writes a box with the preset that
// generates, and refuses a name that is not a preset.
func TestInitAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, _, err := gbx(t, dir, "init", "--agent", "codex")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "OPENAI_API_KEY=... gbx dev") {
		t.Errorf("init printed %q", out)
	}
	cfg, err := generator.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Type != "acp" || cfg.Agent.Command[0] != "codex-acp" || cfg.Env["OPENAI_API_KEY"].Inject == nil || cfg.Network == nil || cfg.Network.Default != "deny" {
		t.Errorf("the box gbx init --agent codex wrote: agent %+v, env %+v, network %+v", cfg.Agent, cfg.Env, cfg.Network)
	}
	if _, _, err := gbx(t, t.TempDir(), "init", "--agent", "claud-code"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), `did you mean "claude-code"`) {
		t.Errorf("init --agent claud-code = %v, want a usage error naming claude-code", err)
	}
}
