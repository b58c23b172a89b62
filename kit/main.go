package kit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	buildversion "github.com/glovebox-dev/glovebox/internal/version"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// DefaultPort is the port the kit listens on when neither GLOVEBOX_PORT
// nor PORT is set.
const DefaultPort = protocol.DefaultPort

// shutdownGrace bounds a graceful shutdown after SIGTERM or SIGINT.
const shutdownGrace = 10 * time.Second

// Main is the glovebox-kit command line:
//
//	glovebox-kit [--manifest PATH] [--root DIR] [--state-dir DIR] [--version]
//
// The manifest path comes from --manifest, else GLOVEBOX_MANIFEST, else
// glovebox.json in the working directory; --root (GLOVEBOX_ROOT) re-roots
// the manifest's fs paths and the state directory. The key is GLOVEBOX_KEY,
// the public URL GLOVEBOX_PUBLIC_URL (default http://localhost:<port>; set
// but empty gives relative file URLs, as v1), the port GLOVEBOX_PORT, else
// PORT, else 8080. GLOVEBOX_LOG sets the log level (debug, info, warn,
// error; default info) and GLOVEBOX_LOG_FORMAT the format of the logs on
// stderr (text or json; default text): see NewLogHandler.
// GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1 lets a box whose sandbox cannot keep
// sessions apart, or cannot enforce its egress policy, serve anyway, as the
// manifest's sandbox.allow_degraded does (see the package doc).
//
// A program started as a sandbox supervisor serves as one and exits
// (sandbox.MaybeSupervise): a Go agent's main that calls Main first thing
// needs nothing else to be its sessions' supervisor.
//
// Run as root, where the sandbox gives each session a uid of its own, Main
// separates privileges (privsep_linux.go): it stays root as a small
// monitor that makes sessions' directories, uids, cgroups and
// supervisors, and serves from a second process of the same executable
// that runs as the kit user (the state directory's owner where that is a
// user of its own, as in the images, else the uid and gid just below the
// sessions' range; no capabilities, no_new_privs), where every byte from
// clients and agents is parsed. GLOVEBOX_PRIVSEP=off keeps it in one process.
//
// As a container's PID 1, Main acts as the container's init: it starts the
// kit again as its child, forwards signals to it, reaps the orphans agents
// leave behind (which would otherwise pile up as zombies), and returns the
// kit's exit status. GLOVEBOX_INIT=off turns that
// off for containers that already run an init.
//
// Main takes the process's environment in env and returns the status the
// process exits with: 0, 1 for a failure it has reported, or the kit's own
// status when it ran as the init. The init and the secret scrubbing act on
// the process itself, so they read it directly.
//
// resolve returns the agent for the manifest. Main serves until ctx ends
// or SIGTERM or SIGINT arrives, then drains (Server.Drain): the box takes
// no new sessions or prompts, tells its clients, and lets running prompts
// finish for up to the manifest's sessions.drain (default 30s) before it
// closes; it then returns 0. A second signal cuts the drain at once. It
// writes every problem to stderr itself, one line each.
func Main(ctx context.Context, env Env, resolve func(*protocol.Manifest, *slog.Logger) (agent.Agent, error)) int {
	sandbox.MaybeSupervise()
	err := run(ctx, env, resolve)
	var status *ExitStatusError
	switch {
	case errors.As(err, &status):
		return status.Code // the kit's status, passed on by its init
	case err != nil:
		return 1 // run has reported it
	}
	return 0
}

// Env is the environment Main runs in. A cmd's main fills it from the
// process: kit.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr,
// LookupEnv: os.LookupEnv}.
type Env struct {
	// Args are the command line's arguments, without the program name.
	Args           []string
	Stdout, Stderr io.Writer
	// LookupEnv reads an environment variable (os.LookupEnv); nil means
	// an empty environment.
	LookupEnv func(string) (string, bool)
}

func (e Env) getenv(name string) string {
	if e.LookupEnv == nil {
		return ""
	}
	v, _ := e.LookupEnv(name)
	return v
}

// run is Main up to the exit status: nil, an *ExitStatusError from the
// init, or another error it has reported.
func run(ctx context.Context, env Env, resolve func(*protocol.Manifest, *slog.Logger) (agent.Agent, error)) error {
	start := time.Now()
	if err := protectSecrets(); err != nil {
		fmt.Fprintf(env.Stderr, "glovebox-kit: %v\n", err)
		return err
	}
	if needsInit() {
		return runInit(env.Args, env.Stderr)
	}
	// A privilege-separated kit's front drops its privileges before it
	// reads anything else (privsep_linux.go).
	fr, err := frontOf(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "glovebox-kit: %v\n", err)
		return err
	}
	fl, err := parseFlags(env)
	if fl == nil {
		return err // help, version, or a bad command line
	}
	if fr == nil {
		// The process that serves holds the state directory (the
		// monitor's lock covers its front).
		lock, err := lockState(fl.statePath())
		if err != nil {
			fmt.Fprintf(env.Stderr, "glovebox-kit: %v\n", err)
			return &BootError{Problems: []string{err.Error()}}
		}
		if lock != nil {
			defer lock.Close()
		}
		if handled, err := runMonitor(ctx, env, fl); handled {
			return err
		}
	}
	k, err := bootKit(env, fl, fr, resolve)
	if err != nil {
		return err
	}
	attrs := []any{"name", k.man.Name, "version", k.man.Version, "agent", k.man.AgentType(), "addr", k.ln.Addr().String(),
		"boot", time.Since(start).Round(100 * time.Microsecond).String()}
	if fr != nil {
		attrs = append(attrs, "front_uid", os.Getuid())
	}
	k.log.Info("glovebox-kit serving", attrs...)
	return k.serve(ctx, env.Stderr)
}

// flags are the kit's command line.
type flags struct {
	manifest, root, stateDir string
}

// parseFlags reads the command line. It returns nil flags when the kit
// has nothing more to do: asked for help or its version (err nil), or
// given a bad command line (err says why, already reported).
func parseFlags(env Env) (*flags, error) {
	fl := flag.NewFlagSet("glovebox-kit", flag.ContinueOnError)
	fl.SetOutput(env.Stderr)
	manifestPath := fl.String("manifest", env.getenv("GLOVEBOX_MANIFEST"), "path of the box's `glovebox.json` (env GLOVEBOX_MANIFEST)")
	root := fl.String("root", env.getenv("GLOVEBOX_ROOT"), "re-root the manifest's fs paths and the state dir under `DIR` (env GLOVEBOX_ROOT)")
	stateDir := fl.String("state-dir", env.getenv("GLOVEBOX_STATE_DIR"), "the kit's state `DIR` (default /var/glovebox, re-rooted; env GLOVEBOX_STATE_DIR)")
	version := fl.Bool("version", false, "print the kit's version and exit")
	if err := fl.Parse(env.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	if *version {
		fmt.Fprintf(env.Stdout, "glovebox-kit %s\n", buildversion.String(Version))
		return nil, nil
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "glovebox-kit: unexpected argument %q (the image's entrypoint is the kit: to run a command in it, use docker run --entrypoint %s IMAGE)\n", fl.Arg(0), fl.Arg(0))
		return nil, fmt.Errorf("unexpected argument %q", fl.Arg(0))
	}
	f := &flags{manifest: *manifestPath, root: *root, stateDir: *stateDir}
	if f.manifest == "" {
		f.manifest = "glovebox.json"
	}
	if f.root != "" {
		if abs, err := filepath.Abs(f.root); err == nil {
			f.root = abs
		}
	}
	return f, nil
}

// booted is a kit ready to serve: its server, listener, manifest and log.
type booted struct {
	srv *Server
	ln  net.Listener
	man *protocol.Manifest
	log *slog.Logger
	// gone, in a privilege-separated kit's front, is closed if its monitor
	// goes away: nothing could make or end a session then.
	gone <-chan struct{}
}

// bootKit reads the manifest and the environment, makes the server and
// listens, or in a privilege-separated kit's front (fr) takes the
// monitor's sandbox and listener. Every problem it finds is written to
// stderr, one line each, and returned as a *BootError.
func bootKit(env Env, fl *flags, fr *front, resolve func(*protocol.Manifest, *slog.Logger) (agent.Agent, error)) (*booted, error) {
	stderr := env.Stderr
	var problems []string
	handler, err := NewLogHandler(stderr, env.getenv("GLOVEBOX_LOG"), env.getenv("GLOVEBOX_LOG_FORMAT"))
	if err != nil {
		problems = append(problems, err.Error())
		handler = slog.NewTextHandler(stderr, nil)
	}
	log := slog.New(handler)

	report := func() error {
		for _, p := range problems {
			fmt.Fprintf(stderr, "glovebox-kit: %s\n", p)
		}
		return &BootError{Problems: problems}
	}

	port, key, publicURL, err := serveSettings(env)
	if err != nil {
		problems = append(problems, err.Error())
	}

	man, data, err := readManifest(fl, fr)
	if err != nil {
		problems = append(problems, err.Error())
		if strings.TrimSpace(key) == "" {
			problems = append(problems, "GLOVEBOX_KEY is not set: set it to the box key generated with the manifest (glovebox.key)")
		}
		return nil, report()
	}

	opts, more := kitOptions(env, fl, fr, man, data, log, resolve)
	problems = append(problems, more...)
	opts.Key, opts.PublicURL = key, publicURL
	srv, err := New(opts)
	var be *BootError
	if errors.As(err, &be) {
		problems = append(problems, be.Problems...)
	} else if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		if srv != nil {
			srv.Close(context.Background())
		}
		return nil, report()
	}

	if fr != nil {
		return &booted{srv: srv, ln: fr.ln, man: man, log: log, gone: srv.sb.MonitorGone()}, nil
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		srv.Close(context.Background())
		problems = append(problems, fmt.Sprintf("listen on port %d: %v", port, err))
		return nil, report()
	}
	return &booted{srv: srv, ln: ln, man: man, log: log}, nil
}

// readManifest reads the manifest (from fl's path, or the monitor's copy
// in a privilege-separated kit's front) and parses it; data is its bytes.
func readManifest(fl *flags, fr *front) (man *protocol.Manifest, data []byte, err error) {
	data, err = manifestBytes(fl.manifest, fr)
	if err != nil {
		return nil, nil, err
	}
	man, err = parseManifest(fl.manifest, data)
	if err != nil {
		return nil, nil, err
	}
	return man, data, nil
}

// kitOptions is the server's Options for man (whose bytes are data)
// but its key and public URL: the agent resolve gives, the storage
// adapters env configures, and fl's directories. It returns the problems
// it met too.
func kitOptions(env Env, fl *flags, fr *front, man *protocol.Manifest, data []byte, log *slog.Logger, resolve func(*protocol.Manifest, *slog.Logger) (agent.Agent, error)) (Options, []string) {
	var problems []string
	ag, err := resolve(man, log)
	if err != nil {
		problems = append(problems, fmt.Sprintf("agent: %v", err))
	}
	adapters, err := EnvAdapters(env.getenv, man, log)
	if err != nil {
		problems = append(problems, err.Error())
	}
	manSum := sha256.Sum256(data)
	opts := Options{
		Manifest: man,
		Root:     fl.root,
		StateDir: fl.stateDir,
		Agent:    orPlaceholder(ag),
		Adapters: adapters,
		Logger:   log,
		Getenv:   env.getenv,

		ManifestDigest: hex.EncodeToString(manSum[:]), // run records name it (runs.go)
	}
	if fr != nil {
		opts.monitor = fr.monitor
	}
	return opts, problems
}

// serveSettings reads the port (GLOVEBOX_PORT, PORT), the box key
// (GLOVEBOX_KEY) and the public URL (GLOVEBOX_PUBLIC_URL) from env. A bad
// port is an error, with DefaultPort in its place.
func serveSettings(env Env) (port int, key, publicURL string, err error) {
	port, err = listenPort(env.getenv)
	// One trailing newline is the key file's own (glovebox.key ends with
	// one, and kubectl create secret --from-file keeps it): not the key's.
	key = strings.TrimSuffix(strings.TrimSuffix(env.getenv("GLOVEBOX_KEY"), "\n"), "\r")
	set := false
	if env.LookupEnv != nil {
		publicURL, set = env.LookupEnv("GLOVEBOX_PUBLIC_URL")
	}
	if !set {
		publicURL = "http://localhost:" + strconv.Itoa(port)
	}
	return port, key, publicURL, err
}

// manifestBytes is the manifest at path: as the monitor read it for a
// front, else read here.
func manifestBytes(path string, fr *front) ([]byte, error) {
	if fr != nil {
		return fr.manifest, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %v", path, pathCause(err))
	}
	return data, nil
}

// parseManifest parses data, the manifest read from path.
func parseManifest(path string, data []byte) (*protocol.Manifest, error) {
	man, err := protocol.ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %v", path, err)
	}
	return man, nil
}

// serve serves until ctx ends or SIGTERM or SIGINT arrives, then drains
// and closes the server (see Main).
func (k *booted) serve(ctx context.Context, stderr io.Writer) error {
	srv, log := k.srv, k.log
	// Signals are counted here as well as by ctx: the first (or ctx's end)
	// starts the drain, the second cuts it.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(serveCtx, k.ln) }()
	var err error
	signals := 0
	select {
	case err = <-serveErr:
	case <-ctx.Done():
	case <-sigs:
		signals++
	case <-k.gone:
		err = errors.New("the privileged monitor is gone")
	}
	cut := false
	if err == nil {
		cut, err = k.drain(serveErr, sigs, signals)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if cut {
		cancel() // cut at once: no close handshakes
	}
	if cerr := srv.Close(sctx); cerr != nil && !cut {
		log.Warn("shutdown", "err", cerr)
	}
	stopServing()
	if err != nil {
		fmt.Fprintf(stderr, "glovebox-kit: serve: %v\n", err)
		return err
	}
	if cut {
		fmt.Fprintln(stderr, "glovebox-kit: stopped by a second signal before the drain ended")
		return errors.New("drain cut by a second signal")
	}
	log.Info("glovebox-kit stopped")
	return nil
}

// drain lets running prompts finish for up to the manifest's
// sessions.drain. The listener stays open meanwhile: /health answers 503
// and new sessions get a clear refusal instead of a refused connection.
// A second signal (signals counts those already seen) cuts it. It
// returns whether the drain was cut, and Serve's error if Serve ended.
func (k *booted) drain(serveErr <-chan error, sigs <-chan os.Signal, signals int) (cut bool, err error) {
	drain := k.man.DrainTime()
	k.log.Info("shutting down: draining", "drain", drain.String())
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.srv.Drain(dctx)
	}()
	for {
		select {
		case <-done:
			return cut, err
		case err = <-serveErr:
			cancel()
		case <-sigs:
			signals++
			if signals >= 2 {
				k.log.Warn("second signal: cutting the drain")
				cut = true
				cancel()
			}
		}
	}
}

// orPlaceholder keeps New's own "no agent" line out of the report when the
// agent could not be resolved (that problem is reported already).
func orPlaceholder(a agent.Agent) agent.Agent {
	if a == nil {
		return agent.Func(func(context.Context, agent.Turn) (string, error) {
			return "", errors.New("no agent")
		})
	}
	return a
}

// listenPort reads GLOVEBOX_PORT, else PORT, else DefaultPort.
func listenPort(getenv func(string) string) (int, error) {
	for _, name := range []string{"GLOVEBOX_PORT", "PORT"} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return DefaultPort, fmt.Errorf("%s %q is not a port number (0-65535)", name, v)
		}
		return p, nil
	}
	return DefaultPort, nil
}

// statePath is the state directory the flags name, as boot resolves it.
func (fl *flags) statePath() string {
	return hostPath(fl.root, cmp.Or(fl.stateDir, DefaultStateDir))
}
