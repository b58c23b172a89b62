package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/glovebox-dev/glovebox/generator"
)

// devNpm installs the box's [packages] npm for gbx dev as the image has
// them: from the lock in DIR/dist/npm (made with npm from the registry
// when it is missing or for other packages, as gbx generate does, without
// writing dist/), with `npm ci` into STATE/npm/<hash of the lock>, once per
// lock. It returns the directory of their programs for the agents' PATH,
// "" when the box has no npm packages.
func devNpm(ctx context.Context, stdio IO, dir, state string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, generator.ConfigFile)); err != nil {
		return "", nil // a glovebox.json box: no [packages]
	}
	cfg, err := generator.Load(dir)
	if err != nil {
		return "", err
	}
	manifest := generator.NpmManifest(cfg)
	if manifest == nil {
		return "", nil
	}
	prev, err := os.ReadFile(filepath.Join(dir, "dist", generator.NpmLockFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read npm lock: %w", err)
	}
	lock, err := generator.ResolveNpm(ctx, cfg, prev)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	stamp := hex.EncodeToString(sum[:])
	install := filepath.Join(state, "npm", stamp[:16])
	bin := filepath.Join(install, "node_modules", ".bin")
	stampFile := filepath.Join(install, "node_modules", ".glovebox-installed")
	if got, err := os.ReadFile(stampFile); err == nil && strings.TrimSpace(string(got)) == stamp {
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("gbx dev: [packages] npm needs npm to install them locally: install Node.js (which brings npm)")
	}
	if err := os.MkdirAll(install, 0o755); err != nil {
		return "", fmt.Errorf("gbx dev: %w", err)
	}
	for name, data := range map[string][]byte{"package.json": manifest, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(install, name), data, 0o644); err != nil {
			return "", fmt.Errorf("gbx dev: %w", err)
		}
	}
	fmt.Fprintf(stdio.Stderr, "gbx dev: installing [packages] npm (%s) from the lock with npm ci\n", strings.Join(cfg.Packages.Npm, ", "))
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = install
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gbx dev: npm ci of [packages] npm in %s: %w: %s", install, err, strings.TrimSpace(out.String()))
	}
	if err := os.WriteFile(stampFile, []byte(stamp+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("gbx dev: %w", err)
	}
	return bin, nil
}
