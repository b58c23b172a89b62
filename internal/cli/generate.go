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
	opts, err := generateOptions(ctx, cfg, outDir, key, *check)
	if err != nil {
		return err
	}
	res, err := generator.Generate(cfg, opts)
	if *check && errors.Is(err, generator.ErrNpmUnresolved) {
		fmt.Fprintf(stdio.Stdout, "%s: %v\n", show(filepath.Join(outDir, generator.NpmLockFile)), strings.TrimPrefix(err.Error(), "generate: "))
		fmt.Fprintf(stdio.Stdout, "run `gbx generate` to update %s\n", show(outDir))
		return &ExitError{Code: 1}
	}
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stdio.Stderr, "gbx: warning: %s\n", w)
	}

	if *check {
		return checkDrift(stdio, outDir, res.Files, key, show)
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
	printKey(stdio, key, outDir, show)
	fmt.Fprint(stdio.Stdout, nextSteps(cfg, dir, outDir, show))
	return nil
}

// printKey says where the box key came from, and its fingerprint.
func printKey(stdio IO, key generator.Key, outDir string, show func(string) string) {
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
}

// generateOptions are the generator's options for cfg: the key, this
// gbx's release, and what outDir keeps from the last run. The npm lock is
// kept while [packages] npm is unchanged; generate makes a new one with npm
// (from the registry) when they change. check resolves nothing: a lock
// that is missing or for other packages is drift.
func generateOptions(ctx context.Context, cfg *generator.Config, outDir string, key generator.Key, check bool) (generator.Options, error) {
	prevLock, prevFly, prevNpm, err := readPrevious(outDir)
	if err != nil {
		return generator.Options{}, err
	}
	npmLock := prevNpm
	if !check {
		if npmLock, err = generator.ResolveNpm(ctx, cfg, prevNpm); err != nil {
			return generator.Options{}, err
		}
	}
	opts := generator.Options{PreviousFly: prevFly, Key: key.Value, Fingerprint: key.Fingerprint, RunsPublicKey: key.RunsPublicKey, KitVersion: kitVersion(), PreviousLock: prevLock, NpmLock: npmLock}
	if pin, ok := generator.ReleasePin(); ok && opts.KitVersion != "latest" {
		pin.Ref = opts.KitVersion // the tag flake.nix names
		opts.Glovebox = &pin
	}
	return opts, nil
}

// readPrevious reads what generate keeps from the output directory's
// last run: flake.lock, fly.toml and the npm lock, each nil when absent.
func readPrevious(outDir string) (lock, fly, npm []byte, err error) {
	lock, err = os.ReadFile(filepath.Join(outDir, generator.LockFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("read lock: %w", err)
	}
	fly, err = os.ReadFile(filepath.Join(outDir, generator.FlyFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("read fly.toml: %w", err)
	}
	npm, err = os.ReadFile(filepath.Join(outDir, generator.NpmLockFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("read npm lock: %w", err)
	}
	return lock, fly, npm, nil
}

// checkDrift is generate --check: it reports each file in outDir that
// differs from files and fails with exit status 1 when any does.
func checkDrift(stdio IO, outDir string, files []generator.File, key generator.Key, show func(string) string) error {
	if key.Source == "manifest" {
		fmt.Fprintf(stdio.Stdout, "%s is not here (it is kept out of git): checking against the fingerprint %s names, %s\n",
			show(filepath.Join(outDir, generator.KeyFile)), show(filepath.Join(outDir, generator.ManifestFile)), key.Fingerprint)
	}
	drifts, err := generator.Diff(outDir, files)
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

// nextSteps are the commands that take a generated box to a running one,
// each exact as printed (paths as the user's working directory sees them).
func nextSteps(cfg *generator.Config, dir, outDir string, show func(string) string) string {
	d, keyFile := show(outDir), show(filepath.Join(outDir, generator.KeyFile))
	build := fmt.Sprintf("cd %s && nix build .#image && ./result | docker load", shellQuote(d))
	if cfg.AgentMain != "" {
		rel, _ := filepath.Rel(dir, outDir)
		build = fmt.Sprintf("cd %s && nix build %s && ./result | docker load", shellQuote(show(dir)), shellQuote("path:.?dir="+filepath.ToSlash(rel)+"#image"))
	}
	fly := fmt.Sprintf("cd %s && fly launch --copy-config --no-deploy (fly.toml lists the rest)", shellQuote(d))
	if cfg.AgentMain != "" {
		rel, _ := filepath.Rel(dir, outDir)
		fly = fmt.Sprintf("cd %s && fly launch --config %s --copy-config --no-deploy (fly.toml lists the rest)", shellQuote(show(dir)), shellQuote(filepath.ToSlash(filepath.Join(rel, generator.FlyFile))))
	}
	root, config := railwayPaths(cfg, dir, outDir)
	secret := fmt.Sprintf("kubectl create secret generic %s", cfg.Name)
	if ns := cfg.Deploy.Kubernetes.Namespace; ns != "" {
		secret += " -n " + ns
	}
	secret += " --from-file=GLOVEBOX_KEY=" + shellQuote(keyFile)
	for _, k := range generator.StorageSecrets(cfg) {
		secret += " --from-literal=" + k + "=..."
	}
	for _, k := range cfg.EnvOrder {
		if e := cfg.Env[k]; e.Secret || e.Required && e.Default == "" {
			secret += " --from-literal=" + k + "=..."
		}
	}
	push := "set [deploy.kubernetes] image to your registry's name for it, `gbx generate`, push it there"
	switch img := cfg.Deploy.Kubernetes.Image; {
	case strings.Contains(img, "@"):
		push = "push the image to " + img[:strings.Index(img, "@")] + " (the digest in [deploy.kubernetes] image must be what the push printed)"
	case img != "":
		push = "docker tag " + cfg.Name + ":" + cfg.Version + " " + img + " && docker push " + img
	}
	return fmt.Sprintf(`
Next steps:
  run it here:      gbx dev %s
  build the image:  gbx build %s
                    (or: %s)
  run the image:    docker run -p 8080:8080 -e GLOVEBOX_KEY="$(cat %s)" %s:%s
  deploy:           keep %s out of git (the generated .gitignore does), then:
    Railway:        service settings: Root Directory %s, Config File %s
    Fly:            %s
    Kubernetes:     %s
                    %s
                    kubectl apply -f %s (or %s, on agent-sandbox)
`, shellQuote(show(dir)), shellQuote(show(dir)), build, shellQuote(keyFile), cfg.Name, cfg.Version, keyFile,
		root, config, fly, secret, push,
		shellQuote(show(filepath.Join(outDir, generator.KubernetesFile))), shellQuote(show(filepath.Join(outDir, generator.AgentSandboxFile))))
}

// railwayPaths are the Railway service's Root Directory and Config File
// settings for the box, as paths from the root of the git repository
// holding it (or from the box directory when none does): Railway reads
// railway.json only at the repository's root or at the Config File's
// absolute path, and builds from the Root Directory, which is dist/, or
// for a Go agent the box directory (its Go module).
func railwayPaths(cfg *generator.Config, dir, outDir string) (root, config string) {
	repo := dir
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			repo = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	from := func(p string) string {
		rel, err := filepath.Rel(repo, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return p
		}
		return "/" + strings.TrimPrefix(filepath.ToSlash(rel), ".")
	}
	root = from(outDir)
	if cfg.AgentMain != "" {
		root = from(dir)
	}
	return root, strings.TrimSuffix(from(outDir), "/") + "/" + generator.RailwayFile
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
