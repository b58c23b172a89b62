// Package nixtest runs real Nix evaluations from Go tests, offline.
//
// No nixpkgs is available where these tests run, so flakes are evaluated
// against a stand-in nixpkgs shipped in nix/testdata/nixpkgs: a small flake
// with the same attribute paths (lib, legacyPackages.<system>.buildGoModule,
// dockerTools.streamLayeredImage, python3.withPackages, the packages the
// base images name, ...) whose functions assert their required arguments and
// record them under `standIn`.
//
// Two ways to point a flake at the stand-in:
//
//   - pass StandIn.OverrideInput("nixpkgs") to nix, which replaces the input
//     without reading its lock entry; or
//   - write a flake.lock whose github-typed nixpkgs node carries
//     StandIn.NarHash: StandInNixpkgs registers the stand-in in the store
//     under the name "source", so Nix finds that path and never fetches.
//     This exercises the real lock shape (version, root, node wiring, and
//     that "original" matches flake.nix); rev and lastModified are not
//     checked on this path.
//
// Every helper fails the test with nix's stderr on error. Tests call Require
// first: it skips when nix is absent, unless the CI environment variable is
// set, in which case a missing nix fails the test.
package nixtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Systems are the systems every Glovebox flake builds for.
var Systems = []string{"x86_64-linux", "aarch64-linux"}

// config is appended to any NIX_CONFIG the caller has. The eval cache is
// off so that concurrent test binaries never share a stale result. An
// empty build-users-group lets nix run on a machine without the nixbld
// group (Debian's nix-bin without nix-setup-systemd): evaluation builds
// nothing, and nix would otherwise warn on every command.
const config = "experimental-features = nix-command flakes\neval-cache = false\nwarn-dirty = false\nbuild-users-group ="

// CommandTimeout bounds one nix command. The slowest, a flake check of
// a generated box, takes seconds; a loaded 2-core machine may take ten
// times as long.
const CommandTimeout = 3 * time.Minute

// Require skips the test when nix is not on PATH and the CI environment
// variable is unset; with CI set, a missing nix fails the test.
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("nix"); err == nil {
		return
	}
	if _, ci := os.LookupEnv("CI"); ci {
		t.Fatal("nix is not on PATH and CI is set: install nix (apt-get install -y nix-bin)")
	}
	t.Skip("nix is not on PATH (set CI to make this a failure)")
}

// Env is the environment for nix subprocesses: the current one with flakes
// enabled in NIX_CONFIG.
func Env() []string {
	env := os.Environ()
	cur := os.Getenv("NIX_CONFIG")
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "NIX_CONFIG=") {
			out = append(out, kv)
		}
	}
	if cur != "" {
		cur += "\n"
	}
	return append(out, "NIX_CONFIG="+cur+config)
}

// Command returns an exec.Cmd for name (nix, nix-instantiate, ...) with Env.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = Env()
	return cmd
}

// Run runs name with args and returns its stdout and stderr. It fails the
// test, quoting stderr, when the command exits non-zero.
func Run(t testing.TB, name string, args ...string) (stdout, stderr []byte) {
	t.Helper()
	stdout, stderr, err := Try(t.Context(), name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr)
	}
	return stdout, stderr
}

// Try runs name with args and returns stdout, stderr and the exit error, for
// tests that expect a failure. The command is killed after CommandTimeout,
// and the error then says what it was waiting for.
func Try(ctx context.Context, name string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeoutCause(ctx, CommandTimeout,
		fmt.Errorf("gave up after %v waiting for %s %s", CommandTimeout, name, strings.Join(args, " ")))
	defer cancel()
	var out, errb bytes.Buffer
	cmd := Command(ctx, name, args...)
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return out.Bytes(), errb.Bytes(), err
}

// EvalJSON runs `nix eval --json args...` and decodes the result into v.
// Typical args: "path:/dir#attr", "--apply", "f", plus StandIn.OverrideInput.
func EvalJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	out, _ := Run(t, "nix", append([]string{"eval", "--json", "--offline"}, args...)...)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("nix eval --json %s: decode %q: %v", strings.Join(args, " "), out, err)
	}
}

// Parse runs `nix-instantiate --parse` on file and fails the test on a
// syntax error.
func Parse(t testing.TB, file string) {
	t.Helper()
	Run(t, "nix-instantiate", "--parse", file)
}

// ModuleRoot returns the directory holding the repository's go.mod, found
// by walking up from the working directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := findModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("nixtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// StandInDir returns the absolute path of the stand-in nixpkgs flake.
func StandInDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(ModuleRoot(t), "nix", "testdata", "nixpkgs")
}

// StandIn is the stand-in nixpkgs, registered in the store.
type StandIn struct {
	// Dir is the stand-in's source directory in the repository.
	Dir string
	// StorePath is where it was added, under the name "source".
	StorePath string
	// NarHash is its SRI NAR hash, the value a flake.lock node carries.
	NarHash string
}

// OverrideInput returns nix flags that replace the flake input named input
// (e.g. "nixpkgs", or "glovebox/nixpkgs") with the stand-in.
func (s StandIn) OverrideInput(input string) []string {
	return []string{"--no-write-lock-file", "--override-input", input, "path:" + s.Dir}
}

var standIn struct {
	once sync.Once
	s    StandIn
	err  error
}

// StandInNixpkgs registers the stand-in nixpkgs in the store under the name
// "source" and returns it. The work is done once per test binary.
func StandInNixpkgs(t testing.TB) StandIn {
	t.Helper()
	Require(t)
	dir := StandInDir(t)
	standIn.once.Do(func() {
		ctx := context.Background()
		hash, stderr, err := Try(ctx, "nix", "hash", "path", dir)
		if err != nil {
			standIn.err = fmt.Errorf("nix hash path %s: %v\n%s", dir, err, stderr)
			return
		}
		path, stderr, err := Try(ctx, "nix", "store", "add-path", "--name", "source", dir)
		if err != nil {
			standIn.err = fmt.Errorf("nix store add-path %s: %v\n%s", dir, err, stderr)
			return
		}
		standIn.s = StandIn{
			Dir:       dir,
			StorePath: strings.TrimSpace(string(path)),
			NarHash:   strings.TrimSpace(string(hash)),
		}
	})
	if standIn.err != nil {
		t.Fatal(standIn.err)
	}
	return standIn.s
}

// CopyTree copies the regular files under src for which keep returns true
// (paths relative to src, slash-separated) into a new directory under
// t.TempDir and returns it. Directories for which keep returns false are
// skipped whole. Use it to evaluate a flake from a clean copy: a flake in a
// git work tree is otherwise read through git, which hides files that are
// not yet added.
func CopyTree(t testing.TB, src string, keep func(rel string, dir bool) bool) string {
	t.Helper()
	dst := t.TempDir()
	if err := copyTreeTo(src, dst, keep); err != nil {
		t.Fatal(err)
	}
	return dst
}

// copyTreeTo is CopyTree into an existing directory dst.
func copyTreeTo(src, dst string, keep func(rel string, dir bool) bool) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if !keep(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// repoFiles is the filter RepoCopy uses: everything but .git,
// node_modules, result links and a top-level dist.
func repoFiles(rel string, dir bool) bool {
	base := filepath.Base(rel)
	switch {
	case base == ".git", base == "node_modules", strings.HasPrefix(base, "result"):
		return false
	case dir && rel == "dist":
		return false
	}
	return true
}

// RepoCopy copies the repository (filtered by repoFiles) into a temporary
// directory, for evaluating the root flake as path:<dir>: a flake in a git
// work tree is otherwise read through git, which hides files that are not
// yet added. The copy is made once per test binary and shared by every
// test; the package's TestMain removes it with RemoveRepoCopy.
func RepoCopy(t testing.TB) string {
	t.Helper()
	repoCopy.once.Do(func() {
		src, err := findModuleRoot()
		if err != nil {
			repoCopy.err = err
			return
		}
		dir, err := os.MkdirTemp("", "glovebox-repo-")
		if err != nil {
			repoCopy.err = err
			return
		}
		repoCopy.dir = dir
		repoCopy.err = copyTreeTo(src, dir, repoFiles)
	})
	if repoCopy.err != nil {
		t.Fatalf("copy the repository: %v", repoCopy.err)
	}
	return repoCopy.dir
}

var repoCopy struct {
	once sync.Once
	dir  string
	err  error
}

// RemoveRepoCopy removes the copy RepoCopy made, if any. Call it from
// TestMain after m.Run.
func RemoveRepoCopy() {
	if repoCopy.dir != "" {
		os.RemoveAll(repoCopy.dir)
	}
}

// harmless are the warnings nix prints here that say nothing about the
// flake under test, matched by their start, each with why it is harmless.
// Any other warning means something and fails the test (see Warnings).
var harmless = []struct{ prefix, why string }{
	{"warning: not writing modified lock file", "the tests override inputs and pass --no-write-lock-file"},
	{"warning: unknown flake output 'lib'", "Nix 2.8 predates lib as a flake output; lib.mkBox is ours"},
	{"warning: Git tree '", "a checkout with uncommitted changes, which tests evaluate on purpose"},
	{"warning: the group 'nixbld' specified in 'build-users-group' does not exist", "machine setup: evaluation builds nothing"},
	{"warning: you don't have Internet access", "the tests run offline by design"},
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// Warnings returns nix's warnings in stderr that mean something: every
// line starting "warning:" (after any colour codes) that is not one of the
// known-harmless warnings above.
func Warnings(stderr []byte) []string {
	var bad []string
	for _, line := range strings.Split(string(stderr), "\n") {
		line = strings.TrimSpace(ansi.ReplaceAllString(line, ""))
		if !strings.HasPrefix(line, "warning:") || isHarmless(line) {
			continue
		}
		bad = append(bad, line)
	}
	return bad
}

func isHarmless(line string) bool {
	for _, h := range harmless {
		if strings.HasPrefix(line, h.prefix) {
			return true
		}
	}
	return false
}

// NoWarnings fails the test for every warning in stderr that means
// something; what names the command that printed it.
func NoWarnings(t testing.TB, what string, stderr []byte) {
	t.Helper()
	for _, w := range Warnings(stderr) {
		t.Errorf("%s warned: %s", what, w)
	}
}
