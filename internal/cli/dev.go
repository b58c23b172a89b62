package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/generator"
	"github.com/glovebox-dev/glovebox/protocol"
)

var devCommand = command{
	name:    "dev",
	summary: "run the box in DIR locally, without a container, until Ctrl-C",
	run:     runDev,
}

func runDev(ctx context.Context, stdio IO, args []string) error {
	var addr, state string
	var verbose, hostEnv, noNix bool
	cleanEnv := true
	fs := newFlags(stdio, "dev", "dev [DIR] [--addr HOST:PORT] [--state DIR] [--host-env] [--no-nix]\n\nRuns the box described by DIR/glovebox.toml (or a DIR/glovebox.json manifest) on\nthis machine: the kit in process, the box's directories under the state\ndirectory, its files in a local SQLite store. The key is $GLOVEBOX_KEY, or one\ngenerated once and kept in the state directory. A Go agent (agent.main) is\nbuilt with go build and run as the image runs it. Ctrl-C stops it.\n\nWith nix on PATH, the box's packages (its base image's and [packages]) are\nbuilt from the pinned nixpkgs and put first on the agents' PATH; without it,\nprompts run with this machine's tools and one warning names the packages\nmissing from PATH. Agents get a clean environment (PATH, locale, CA\nvariables and the box's [env]) unless --host-env. The inspector is on at\n/inspect; the banner prints its link and an export line for the other gbx\ncommands.\n\nPrompts run in the box's sandbox with the layers this machine allows (as\nroot: a uid per session, a private /tmp, namespaces; as another user: your\nuid). gbx dev serves even where they cannot keep sessions apart; the banner\nsays what is in force, what is not and what prompts cannot see, and a\nwarning names each PATH entry the sessions cannot reach.")
	fs.StringVar(&addr, "addr", "", "listen address (default 127.0.0.1:$GLOVEBOX_PORT, else 127.0.0.1:8080)")
	fs.StringVar(&state, "state", "", "state directory (default DIR/.glovebox)")
	fs.BoolVarP(&verbose, "verbose", "v", false, "log every session and prompt")
	fs.BoolVar(&cleanEnv, "clean-env", true, "agents get only PATH, locale and CA variables and the box's [env]")
	fs.BoolVar(&hostEnv, "host-env", false, "agents get this shell's whole environment (but GLOVEBOX_KEY); the same as --clean-env=false")
	fs.BoolVar(&noNix, "no-nix", false, "do not build the box's packages with nix: prompts run with this machine's tools")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: dev takes at most one DIR", ErrUsage)
	}
	dir, state, addr := devLocations(stdio, fs.Arg(0), state, addr)
	key := stdio.Getenv("GLOVEBOX_KEY")
	if key == "" {
		var err error
		if key, err = devKey(filepath.Join(state, "dev.key")); err != nil {
			return err
		}
	}
	m, source, goMain, err := loadManifest(dir)
	if err != nil {
		return err
	}
	// A local run uses its own key; the manifest's fingerprint and run
	// record key are for the deployed box's key.
	m.KeyFingerprint = protocol.Fingerprint(key)
	if m.Runs != nil {
		m.Runs.PublicKey = protocol.RunPublicKey(key)
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: level}))
	if goMain != "" {
		return runGoAgentDev(ctx, stdio, dir, goMain, state, addr, key, source, m)
	}
	if hostEnv {
		cleanEnv = false
	}
	tools, err := devToolsOf(ctx, stdio, m, dir, state, !noNix)
	if err != nil {
		return err
	}
	if err := enterableState(state); err != nil {
		return err
	}
	inner, err := localAgent(m, log)
	if err != nil {
		return err
	}
	ag := &devAgent{Agent: inner, notify: func(line string) { fmt.Fprintln(stdio.Stderr, line) }}
	box, err := startLocalBoxWith(ctx, localBoxOptions{Manifest: m, Key: key, Root: filepath.Join(state, "root"),
		Addr: addr, PublicURL: strings.TrimSuffix(stdio.Getenv("GLOVEBOX_PUBLIC_URL"), "/"), Getenv: stdio.Getenv, Logger: log,
		Environ: devEnviron(tools.path), HostEnv: !cleanEnv, Inspect: true, AllowDegraded: true}, ag)
	if err != nil {
		return err
	}
	sb, err := devSandboxOf(ctx, box.URL, key, tools.path)
	if err != nil {
		box.Close()
		return err
	}
	ag.sb.Store(sb)
	for _, w := range sb.warnings() {
		fmt.Fprintln(stdio.Stderr, w)
	}
	fmt.Fprint(stdio.Stdout, devBanner(m, source, box.URL, key, state, tools, cleanEnv, sb, stdio.Getenv("HOME")))
	return serveUntilDone(ctx, stdio, box)
}

// devLocations are dev's box directory (arg, else the working
// directory), its state directory (state, else DIR/.glovebox) and its
// listen address (addr, else 127.0.0.1:$GLOVEBOX_PORT or the default port).
func devLocations(stdio IO, arg, state, addr string) (dir, stateDir, listen string) {
	dir = absPath(stdio, ".")
	if arg != "" {
		dir = absPath(stdio, arg)
	}
	if state == "" {
		state = filepath.Join(dir, ".glovebox")
	} else {
		state = absPath(stdio, state)
	}
	if addr == "" {
		port := stdio.Getenv("GLOVEBOX_PORT")
		if port == "" {
			port = strconv.Itoa(protocol.DefaultPort)
		}
		addr = "127.0.0.1:" + port
	}
	return dir, state, addr
}

// devToolsOf finds the tools prompts run with (printing the warning about
// any missing), with [packages] npm (an agent preset's CLI), from the
// box's lock, first on PATH, as the image's /bin.
func devToolsOf(ctx context.Context, stdio IO, m *protocol.Manifest, dir, state string, useNix bool) (devTools, error) {
	hostPath := stdio.Getenv("PATH")
	if hostPath == "" {
		hostPath = os.Getenv("PATH")
	}
	tools := findDevTools(ctx, stdio, m, hostPath, useNix)
	if tools.warning != "" {
		fmt.Fprintln(stdio.Stderr, tools.warning)
	}
	if npmBin, err := devNpm(ctx, stdio, dir, state); err != nil {
		return devTools{}, err
	} else if npmBin != "" {
		tools.path = npmBin + string(os.PathListSeparator) + tools.path
	}
	return tools, nil
}

// serveUntilDone waits for ctx to end or the box to stop serving, then
// closes the box.
func serveUntilDone(ctx context.Context, stdio IO, box *localBox) error {
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-box.done:
		box.done <- serveErr // Close reads it again
	}
	err := box.Close()
	fmt.Fprintln(stdio.Stdout, "stopped")
	if serveErr != nil && ctx.Err() == nil {
		return fmt.Errorf("serve: %w", serveErr)
	}
	return err
}

// loadManifest reads DIR/glovebox.toml through the generator, or else a
// DIR/glovebox.json manifest, and returns it with the file it came from
// and, for a Go agent, its main package.
func loadManifest(dir string) (*protocol.Manifest, string, string, error) {
	if _, err := os.Stat(filepath.Join(dir, generator.ConfigFile)); err == nil {
		cfg, err := generator.Load(dir)
		if err != nil {
			return nil, "", "", err
		}
		return cfg.Manifest(""), generator.ConfigFile, cfg.AgentMain, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "glovebox.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", "", fmt.Errorf("no %s (or glovebox.json) in %s: run `gbx init %s` to create one", generator.ConfigFile, dir, dir)
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("read manifest: %w", err)
	}
	m, err := protocol.ParseManifest(data)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", filepath.Join(dir, "glovebox.json"), err)
	}
	if err := m.Check(); err != nil {
		return nil, "", "", fmt.Errorf("%s:\n%w", filepath.Join(dir, "glovebox.json"), err)
	}
	return m, "glovebox.json", "", nil
}

// runGoAgentDev serves a Go agent's box: its own kit, built and run as a
// process, until ctx ends.
func runGoAgentDev(ctx context.Context, stdio IO, dir, main, state, addr, key, source string, m *protocol.Manifest) error {
	if err := enterableState(state); err != nil {
		return err
	}
	box, err := startGoAgent(ctx, stdio, dir, main, state, addr, key, allowDegraded(m))
	if err != nil {
		return err
	}
	// The agent's kit takes its PATH from this process.
	sb, err := devSandboxOf(ctx, box.URL, key, os.Getenv("PATH"))
	if err != nil {
		box.Close()
		return err
	}
	for _, w := range sb.warnings() {
		fmt.Fprintln(stdio.Stderr, w)
	}
	fmt.Fprintf(stdio.Stdout, `box %s %s (Go agent %s, from %s) is running on this machine
  url    %s
  key    %s
  state  %s
%s
For the other gbx commands in this shell:
  export GLOVEBOX_URL=%s GLOVEBOX_KEY=%s

Ctrl-C stops it.
`, m.Name, m.Version, main, source, box.URL, key, state, sb.bannerLines(stdio.Getenv("HOME")), shellQuote(box.URL), shellQuote(key))
	var exitErr error
	select {
	case <-ctx.Done():
	case exitErr = <-box.done:
		box.done <- exitErr
	}
	err = box.Close()
	fmt.Fprintln(stdio.Stdout, "stopped")
	if exitErr != nil && ctx.Err() == nil {
		return fmt.Errorf("the Go agent exited: %w", exitErr)
	}
	return err
}

// devSandboxOf reads the sandbox the box at url got, and checks the
// agents' PATH against it.
func devSandboxOf(ctx context.Context, url, key, path string) (*devSandbox, error) {
	env, err := boxEnvironment(ctx, url, key)
	if err != nil {
		return nil, err
	}
	return newDevSandbox(env, path), nil
}

// enterableState lets the sessions' uids enter the state directory (mode
// 0711: not list it) when gbx dev runs as root, so that where no mount
// namespace gives them their directories they can still reach them under
// it. The key in it stays 0600; the kit makes its own state and the
// sessions' directories private.
func enterableState(state string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.MkdirAll(state, 0o711); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	if err := os.Chmod(state, 0o711); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

// devKey returns the key kept at path, creating it (mode 0600) on first
// use so that a box's URL and key stay the same across runs.
func devKey(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		if k := strings.TrimSpace(string(data)); k != "" {
			return k, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read dev key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("create state directory: %w", err)
	}
	key := protocol.NewKey()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write dev key: %w", err)
	}
	return key, nil
}
