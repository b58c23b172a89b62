// Package testagents installs the npm test agents the kit/agent/acp tests
// drive (kit/agent/acp/testdata/<name>: package.json, package-lock.json
// and scripts) so that a session's sandbox can run them.
//
// Two things kept them from running before: their node_modules had to be
// installed by hand (`npm ci`), or every test that needs them was skipped
// without a word in `go test ./...`; and a checkout under /tmp is invisible
// to a sandboxed session, whose /tmp is a private tmpfs (the agent's
// script and packages are simply not there). Dir installs a test agent
// from its lock itself, and where the checkout is under a temporary
// directory a session cannot see, it installs a copy under /var/tmp
// instead, which sessions see read-only like the rest of the file system.
package testagents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stamp, in node_modules, holds the sha256 of the package-lock.json the
// packages were installed from.
const stamp = ".glovebox-installed"

// Skip skips the test, or fails it when CI is set: CI must run every test.
func Skip(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this is a failure, not a skip)", why)
	}
	t.Skip(why)
}

// Node is the node binary, or a skip (a failure when CI is set).
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Skip(t, "node is not installed: the ACP tests run their agents with it (install Node 20 or later)")
	}
	return node
}

var (
	mu      sync.Mutex
	results = map[string]result{}
)

type result struct {
	dir string
	err error
}

// Dir is the directory of the test agent testdata/<name> (relative to the
// test's package directory) with its npm packages installed from its
// lock, in a place a sandboxed session can read. It runs `npm ci` once
// per test binary when the packages are missing or were installed from
// another lock; where that fails (no network, no npm) the test is skipped
// with the reason and the command to run (a failure when CI is set).
func Dir(t testing.TB, name string) string {
	t.Helper()
	Node(t)
	mu.Lock()
	r, ok := results[name]
	if !ok {
		r.dir, r.err = install(name)
		results[name] = r
	}
	mu.Unlock()
	if r.err != nil {
		Skip(t, fmt.Sprintf("ACP test agent %s: %v; with network, run `npm ci` in kit/agent/acp/testdata/%s", name, r.err, name))
	}
	return r.dir
}

func install(name string) (string, error) {
	src, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		return "", err
	}
	return installFrom(src, name)
}

// installFrom installs the test agent in src (a copy of it where src is
// hidden from sessions) and returns its directory.
func installFrom(src, name string) (string, error) {
	var err error
	if real, err := filepath.EvalSymlinks(src); err == nil {
		src = real
	}
	dir := src
	if Hidden(src) {
		if dir, err = copyOut(src, name); err != nil {
			return "", err
		}
	}
	return npmCI(dir)
}

// Lock installs the npm packages of a package.json and package-lock.json
// (as `gbx generate` writes them to dist/npm) with `npm ci` into a
// directory under /var/tmp that sessions can read, as the image builds
// them: the directory, with node_modules/.bin holding the programs. Like
// Dir it skips the test when npm ci fails.
func Lock(t testing.TB, name string, manifest, lock []byte) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	dir, err := writeOut(name, map[string][]byte{"package.json": manifest, "package-lock.json": lock})
	if err == nil {
		dir, err = npmCI(dir)
	}
	if err != nil {
		Skip(t, fmt.Sprintf("npm packages of %s: %v", name, err))
	}
	return dir
}

// npmCI installs dir's package-lock.json with npm ci unless node_modules
// holds it already.
func npmCI(dir string) (string, error) {
	lock := filepath.Join(dir, "package-lock.json")
	data, err := os.ReadFile(lock)
	if errors.Is(err, fs.ErrNotExist) {
		return dir, nil // a script without packages
	} else if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	// One go test at a time installs into a directory: other packages'
	// test binaries may run the same install.
	f, err := os.Open(lock)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if got, err := os.ReadFile(filepath.Join(dir, "node_modules", stamp)); err == nil && strings.TrimSpace(string(got)) == want {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", errors.New("its npm packages are not installed and npm is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("its npm packages are not installed and `npm ci` in %s failed (%v): %s", dir, err, lastLines(out.String(), 3))
	}
	if err := os.WriteFile(filepath.Join(dir, "node_modules", stamp), []byte(want+"\n"), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// Hidden reports whether path is under a directory a sandboxed session
// sees a private, empty tmpfs in place of: /tmp and /dev/shm.
func Hidden(path string) bool {
	for _, d := range []string{"/tmp", "/dev/shm"} {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			d = real
		}
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// copyOut copies the test agent's own files (not node_modules) to
// /var/tmp/glovebox-acp-<uid>/<name>-<hash of the files>, which sessions
// can read.
func copyOut(src, name string) (string, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = data
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("read %s: %w", src, err)
	}
	return writeOut(name, files)
}

// writeOut writes files to /var/tmp/glovebox-acp-<uid>/<name>-<hash of
// the files>.
func writeOut(name string, files map[string][]byte) (string, error) {
	h := sha256.New()
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(files[rel]))
		h.Write(files[rel])
	}
	top := filepath.Join("/var/tmp", fmt.Sprintf("glovebox-acp-%d", os.Getuid()))
	if err := os.Mkdir(top, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("make %s: %w", top, err)
	}
	// /var/tmp is shared: use the directory only if it is ours.
	st, err := os.Lstat(top)
	if err != nil {
		return "", err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !st.IsDir() || int(sys.Uid) != os.Getuid() || st.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%s is not a directory of this user's that only it can write; remove it", top)
	}
	if err := os.Chmod(top, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(top, name+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	for rel, data := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
