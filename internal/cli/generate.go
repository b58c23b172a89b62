package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/glovebox-dev/glovebox/generator"
)

var generateCommand = command{
	name:    "generate",
	summary: "write dist/ (flake, nixpacks.toml, manifest, key, deploy files) from glovebox.toml",
	run:     runGenerate,
}

func runGenerate(ctx context.Context, stdio IO, args []string) error {
	flags := newFlags(stdio, "generate", "generate [DIR] [--out DIR] [--check] [--rotate-key]\n\n"+
		"Reads DIR/glovebox.toml (DIR defaults to .) and writes the box's artefacts.\n"+
		"The box key is GLOVEBOX_KEY or glovebox.key, kept across runs; --rotate-key\n"+
		"replaces it (with GLOVEBOX_KEY when set). A new key is made only when there is\n"+
		"none and no committed glovebox.json names one; --check without the key compares\n"+
		"with the fingerprint glovebox.json names.")
	check := flags.Bool("check", false, "report files that differ from what would be generated, write nothing, exit 1 on drift")
	out := flags.String("out", "", "output directory (default DIR/dist)")
	rotate := flags.Bool("rotate-key", false, "replace the box key with GLOVEBOX_KEY, else a new one")
	if err := parseFlags(flags, args); err != nil {
		return helpOK(err)
	}
	if flags.NArg() > 1 {
		return fmt.Errorf("%w: generate takes at most one directory, got %d arguments", ErrUsage, flags.NArg())
	}
	if *check && *rotate {
		return fmt.Errorf("%w: --check writes nothing, so it cannot rotate the key", ErrUsage)
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
	key, err := generator.ResolveKey(outDir, stdio.Getenv("GLOVEBOX_KEY"), *rotate, *check)
	if err != nil {
		return err
	}
	prevLock, err := os.ReadFile(filepath.Join(outDir, generator.LockFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read lock: %w", err)
	}
	prevFly, err := os.ReadFile(filepath.Join(outDir, generator.FlyFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read fly.toml: %w", err)
	}
	opts := generator.Options{PreviousFly: prevFly, Key: key.Value, Fingerprint: key.Fingerprint, KitVersion: kitVersion(), PreviousLock: prevLock}
	if pin, ok := generator.ReleasePin(); ok && opts.KitVersion != "latest" {
		pin.Ref = opts.KitVersion // the tag flake.nix names
		opts.Glovebox = &pin
	}
	res, err := generator.Generate(cfg, opts)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stdio.Stderr, "gbx: warning: %s\n", w)
	}

	if *check {
		if key.Source == "manifest" {
			fmt.Fprintf(stdio.Stdout, "%s is not here (it is kept out of git): checking against the fingerprint %s names, %s\n",
				show(filepath.Join(outDir, generator.KeyFile)), show(filepath.Join(outDir, generator.ManifestFile)), key.Fingerprint)
		}
		drifts, err := generator.Diff(outDir, res.Files)
		if err != nil {
			return err
		}
		if len(drifts) == 0 {
			fmt.Fprintf(stdio.Stdout, "%s is up to date\n", show(outDir))
			return nil
		}
		for _, d := range drifts {
			if strings.Contains(d.Diff, "\n") {
				fmt.Fprintf(stdio.Stdout, "%s: differs\n  %s\n", show(filepath.Join(outDir, d.Name)), strings.ReplaceAll(d.Diff, "\n", "\n  "))
			} else {
				fmt.Fprintf(stdio.Stdout, "%s: %s\n", show(filepath.Join(outDir, d.Name)), d.Diff)
			}
		}
		fmt.Fprintf(stdio.Stdout, "%d file(s) differ: run `gbx generate` to update %s\n", len(drifts), show(outDir))
		return &ExitError{Code: 1}
	}

	changed, err := generator.Write(outDir, res.Files)
	if err != nil {
		return err
	}
	for _, name := range changed {
		fmt.Fprintf(stdio.Stdout, "wrote %s\n", show(filepath.Join(outDir, name)))
	}
	if len(changed) == 0 {
		fmt.Fprintf(stdio.Stdout, "%s is up to date\n", show(outDir))
	}
	switch key.Source {
	case "rotated":
		fmt.Fprintf(stdio.Stdout, "rotated the box key: fingerprint %s (redeploy with the new GLOVEBOX_KEY)\n", key.Fingerprint)
	case "new":
		fmt.Fprintf(stdio.Stdout, "new box key: fingerprint %s (keep %s secret)\n", key.Fingerprint, show(filepath.Join(outDir, generator.KeyFile)))
	case "GLOVEBOX_KEY":
		fmt.Fprintf(stdio.Stdout, "box key from GLOVEBOX_KEY: fingerprint %s\n", key.Fingerprint)
	default:
		fmt.Fprintf(stdio.Stdout, "box key kept: fingerprint %s\n", key.Fingerprint)
	}
	d, keyFile := show(outDir), show(filepath.Join(outDir, generator.KeyFile))
	fmt.Fprintf(stdio.Stdout, `
Next steps:
  run it here:      gbx dev %s
  build the image:  (cd %s && nix build) && ./result | docker load
  run the image:    GLOVEBOX_KEY=$(cat %s) docker run -p 8080:8080 -e GLOVEBOX_KEY %s:%s
  deploy:           push %s: Railway builds its Dockerfile (railway.json), Fly reads
                    fly.toml, Kubernetes kubernetes.json; keep %s out of git
`, show(dir), d, keyFile, cfg.Name, cfg.Version, d, keyFile)
	return nil
}

// releaseRE is a release tag: vX.Y.Z, perhaps with a pre-release, and not
// a Go pseudo-version (whose commit is no tag a flake can name).
var releaseRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.-]+)?$`)
var pseudoRE = regexp.MustCompile(`[0-9]{14}-[0-9a-f]{12}$`)

// kitVersion is the glovebox release generated files pin (the flake's
// glovebox input, the kit nixpacks installs): this gbx's version, stamped
// with -ldflags or, for `go install .../gbx@vX.Y.Z`, the module version Go
// records; "latest" for a development build.
func kitVersion() string { return kitVersionOf(Version, buildVersion()) }

// kitVersionOf is kitVersion for a stamped version and the module's
// build version, the first that is a release.
func kitVersionOf(versions ...string) string {
	for _, v := range versions {
		if releaseRE.MatchString(v) && !pseudoRE.MatchString(v) {
			return v
		}
	}
	return "latest"
}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}

// shownPath shows p relative to the working directory when it is below it.
func shownPath(wd, p string) string {
	if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}
