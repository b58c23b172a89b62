package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevNpm: gbx dev installs [packages] npm from the box's lock with npm
// ci into its state directory, once per lock, and puts their programs
// first on the agents' PATH.
func TestDevNpm(t *testing.T) {
	t.Parallel()
	golden := filepath.Join("..", "..", "generator", "testdata", "media")
	box := t.TempDir()
	if err := os.CopyFS(filepath.Join(box, "dist", "npm"), os.DirFS(filepath.Join(golden, "dist", "npm"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(box, "glovebox.toml"), []byte("name = \"m\"\n[packages]\nnpm = [\"cowsay\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(box, ".glovebox")
	var stderr bytes.Buffer
	stdio := IO{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: os.Getenv, Dir: box}
	bin, err := devNpm(context.Background(), stdio, box, state)
	if err != nil {
		msg := "this test installs cowsay from the npm registry with npm ci, which failed (offline?): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if !strings.HasPrefix(bin, filepath.Join(state, "npm")+"/") || !strings.Contains(stderr.String(), "installing [packages] npm (cowsay) from the lock with npm ci") {
		t.Errorf("devNpm = %q, stderr %q", bin, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(bin, "cowsay")); err != nil {
		t.Errorf("no cowsay in %s: %v", bin, err)
	}
	stderr.Reset()
	if again, err := devNpm(context.Background(), stdio, box, state); err != nil || again != bin || stderr.Len() != 0 {
		t.Errorf("second devNpm = %q, %v, stderr %q: want the same install, not redone", again, err, stderr.String())
	}
	// A box without npm packages: nothing.
	if err := os.WriteFile(filepath.Join(box, "glovebox.toml"), []byte("name = \"m\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if none, err := devNpm(context.Background(), stdio, box, state); err != nil || none != "" {
		t.Errorf("devNpm without npm packages = %q, %v", none, err)
	}
}
