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
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/generator"
)

var buildCommand = command{
	name:    "build",
	summary: "build the box image from dist/ with Nix and load it into Docker or Podman",
	run:     runBuild,
}

// minNix is the oldest Nix that evaluates the pinned nixpkgs.
var minNix = [2]int{2, 18}

func runBuild(ctx context.Context, stdio IO, args []string) error {
	flags := newFlags(stdio, "build", "build [DIR] [--out DIR] [--no-load]\n\n"+
		"Builds the image of the box in DIR (default .) from what `gbx generate` wrote\n"+
		"(DIR/dist, or --out) with `nix build`, then loads it into Docker, else Podman.\n"+
		"It needs Nix "+strconv.Itoa(minNix[0])+"."+strconv.Itoa(minNix[1])+" or newer; without Docker or Podman it builds and says how to load.")
	out := flags.String("out", "", "the generated directory (default DIR/dist)")
	noLoad := flags.Bool("no-load", false, "build only: leave the image as the result link")
	if err := parseFlags(flags, args); err != nil {
		return helpOK(err)
	}
	if flags.NArg() > 1 {
		return fmt.Errorf("%w: build takes at most one directory, got %d arguments", ErrUsage, flags.NArg())
	}
	dir := stdio.Dir
	if flags.NArg() == 1 {
		dir = absPath(stdio, flags.Arg(0))
	}
	outDir := filepath.Join(dir, "dist")
	if *out != "" {
		outDir = absPath(stdio, *out)
	}
	show := func(p string) string { return shownPath(stdio.Dir, p) }
	cfg, err := generator.Load(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(outDir, generator.FlakeFile)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s in %s: run `gbx generate %s` first", generator.FlakeFile, show(outDir), shellQuote(show(dir)))
	}
	path := stdio.Getenv("PATH")
	nix := lookPathIn("nix", path)
	if nix == "" {
		return fmt.Errorf("gbx build needs Nix %d.%d or newer, and there is no nix on PATH: install it (nixos.org/download), or build %s with `docker build` (it builds the same image with Nix inside)", minNix[0], minNix[1], show(filepath.Join(outDir, generator.DockerFile)))
	}
	if err := checkNixVersion(ctx, nix); err != nil {
		return err
	}
	ref, err := imageRef(cfg, dir, outDir, show)
	if err != nil {
		return err
	}
	result := filepath.Join(outDir, "result")
	fmt.Fprintf(stdio.Stderr, "gbx build: nix build %s (the first build downloads nixpkgs and the box's packages)\n", ref)
	cmd := exec.CommandContext(ctx, nix, "build", ref, "--out-link", result)
	cmd.Env = append(os.Environ(), "PATH="+path, "NIX_CONFIG="+nixConfig(stdio.Getenv("NIX_CONFIG")))
	cmd.Stdout, cmd.Stderr = stdio.Stderr, stdio.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nix build %s: %w (its output is above)", ref, err)
	}
	image := cfg.Name + ":" + cfg.Version
	engine := ""
	for _, e := range []string{"docker", "podman"} {
		if p := lookPathIn(e, path); p != "" {
			engine = p
			break
		}
	}
	switch {
	case *noLoad:
		fmt.Fprintf(stdio.Stdout, "built %s: %s streams the image %s (%s | docker load)\n", image, show(result), image, shellQuote(show(result)))
		return nil
	case engine == "":
		fmt.Fprintf(stdio.Stdout, "built %s, but found neither docker nor podman on PATH to load it into: run %s | docker load (or podman load) where one is\n", image, shellQuote(show(result)))
		return nil
	}
	if err := loadImage(ctx, stdio, result, engine, show); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "loaded %s into %s: docker run -p 8080:8080 -e GLOVEBOX_KEY=\"$(cat %s)\" %s\n", image, filepath.Base(engine),
		shellQuote(show(filepath.Join(outDir, generator.KeyFile))), image)
	return nil
}

// imageRef is the flake output gbx build builds. A Go agent's flake
// builds the module around dist/ (src = ./..): the flake is then the box
// directory's, entered at dist.
func imageRef(cfg *generator.Config, dir, outDir string, show func(string) string) (string, error) {
	if cfg.AgentMain == "" {
		return "path:" + outDir + "#image", nil
	}
	rel, err := filepath.Rel(dir, outDir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("a Go agent's dist/ must be inside its box directory %s (its flake builds the module around it), not %s", show(dir), show(outDir))
	}
	return "path:" + dir + "?dir=" + filepath.ToSlash(rel) + "#image", nil
}

// loadImage runs the image stream result and pipes it into engine load.
func loadImage(ctx context.Context, stdio IO, result, engine string, show func(string) string) error {
	stream := exec.CommandContext(ctx, result)
	load := exec.CommandContext(ctx, engine, "load")
	pipe, err := stream.StdoutPipe()
	if err != nil {
		return err
	}
	var streamErr bytes.Buffer
	stream.Stderr = &streamErr
	load.Stdin = pipe
	load.Stdout, load.Stderr = stdio.Stderr, stdio.Stderr
	if err := stream.Start(); err != nil {
		return fmt.Errorf("run %s: %w", show(result), err)
	}
	loadErr := load.Run()
	if err := stream.Wait(); err != nil {
		return fmt.Errorf("%s (the image stream): %w: %s", show(result), err, clip(streamErr.String(), 300))
	}
	if loadErr != nil {
		return fmt.Errorf("%s load: %w (its output is above)", filepath.Base(engine), loadErr)
	}
	return nil
}

// nixConfig turns on the flakes and nix-command features for a nix run.
func nixConfig(conf string) string {
	if !strings.Contains(conf, "experimental-features") {
		conf = strings.TrimSpace(conf + "\nexperimental-features = nix-command flakes")
	}
	return conf
}

var nixVersionRE = regexp.MustCompile(`\b([0-9]+)\.([0-9]+)(\.[0-9]+)?`)

// checkNixVersion reports a nix older than minNix, which cannot evaluate
// the pinned nixpkgs.
func checkNixVersion(ctx context.Context, nix string) error {
	out, err := exec.CommandContext(ctx, nix, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", nix, err)
	}
	m := nixVersionRE.FindStringSubmatch(string(out))
	if m == nil {
		return fmt.Errorf("%s --version printed %q, not a version", nix, clip(strings.TrimSpace(string(out)), 100))
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < minNix[0] || major == minNix[0] && minor < minNix[1] {
		return fmt.Errorf("%s is Nix %s.%s, and the pinned nixpkgs needs %d.%d or newer: install a current Nix (nixos.org/download; distribution packages are often older)", nix, m[1], m[2], minNix[0], minNix[1])
	}
	return nil
}
