package kit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/internal/version"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/cors"
	"github.com/glovebox-dev/glovebox/kit/files"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/kit/logs"
	"github.com/glovebox-dev/glovebox/kit/metrics"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/kit/upload"
	"github.com/glovebox-dev/glovebox/protocol"
)

// boot collects every problem found while preparing a Server.
type boot struct {
	problems []string

	// The phases' durations, for a debug line: what a start spends where.
	phases []any
	mark   time.Time
}

// phase ends the boot phase name (it began at the last mark).
func (b *boot) phase(name string) {
	now := time.Now()
	if !b.mark.IsZero() {
		b.phases = append(b.phases, name, now.Sub(b.mark).Round(10*time.Microsecond).String())
	}
	b.mark = now
}

func (b *boot) add(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

func (b *boot) err() error {
	if len(b.problems) == 0 {
		return nil
	}
	return &BootError{Problems: b.problems}
}

// run checks opts and builds the server. It returns a partial server (so
// that opened storage can be closed) or nil.
func (b *boot) run(opts Options) *Server {
	m := opts.Manifest
	if m == nil {
		b.add("manifest: none given")
		return nil
	}
	m = runsManifest(b, m, opts.Key) // runs.go: the run records' public key
	if err := m.Check(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			b.add("%s", line)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ring := logs.NewRing(time.Now)
	log = logs.Tee(log, ring)
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	s := newServer(opts, m, log, getenv)
	b.phase("")

	b.checkKey(opts.Key, m)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s.auth = newAuth(opts.Key, now, log)
	b.checkEnv(m, getenv)
	if opts.Agent == nil {
		b.add("no agent: Options.Agent is nil")
	}

	s.readLimits(m)
	s.budget = newBudgets(m.Limits, s.maxMessage)
	b.dirs(&s.config, m, opts)
	b.phase("checks")
	b.storage(s)
	b.snapshots(s) // snapshots.go

	// Agent environment and sandbox.
	s.baseEnv = agentBaseEnv(opts, m, getenv)
	s.openSandbox(b)
	b.phase("sandbox")
	if len(b.problems) == 0 {
		s.reclaim() // reclaim.go: what a killed kit left
	}
	b.phase("reclaim")
	s.preview = newPreviews(s, now) // before egress, which copies the capabilities
	if s.preview.enabled() {
		s.caps = append(slices.Clip(s.caps), protocol.CapPreview)
	}
	b.egress(s)
	b.phase("egress")
	b.features(s, ring, now)
	b.phase("bodies")
	log.Debug("boot phases", b.phases...)
	return s
}

// newServer is the server for m before any check: the defaults of its
// configuration, its sessions' table and counters, and the context its
// sessions end with.
func newServer(opts Options, m *protocol.Manifest, log *slog.Logger, getenv func(string) string) *Server {
	s := &Server{
		opts: opts,
		man:  m,
		config: config{
			log:          log,
			getenv:       getenv,
			machine:      flyMachine(getenv),
			maxMessage:   DefaultMaxMessage,
			maxInput:     DefaultMaxInput,
			inputTimeout: DefaultInputTimeout,
			maxSessions:  DefaultMaxSessions,
			maxQueue:     DefaultMaxQueue,
			resumeGrace:  DefaultResumeGrace,
			pingInterval: opts.PingInterval,
			runnerLinger: cmp.Or(opts.runnerLinger, runnerLinger),
			parkAfter:    cmp.Or(opts.parkAfter, parkAfter),
			caps:         capabilities,
			maxTerminals: cmp.Or(opts.MaxTerminals, DefaultMaxTerminals),
			maxProcesses: cmp.Or(opts.MaxProcesses, DefaultMaxProcesses),
		},
		live:   live{sessions: map[string]*session{}, conns: map[*conn]struct{}{}},
		obs:    metrics.NewCounters(),
		memory: newMemoryReturner(opts.memoryQuiet, opts.collect),
	}
	s.drain = newDrain(&s.live, log)
	if s.pingInterval <= 0 {
		s.pingInterval = DefaultPingInterval
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	return s
}

// checkKey says what is wrong with the box key: unset, or not the one
// the manifest was generated with.
func (b *boot) checkKey(key string, m *protocol.Manifest) {
	switch {
	case strings.TrimSpace(key) == "":
		b.add("GLOVEBOX_KEY is not set: set it to the box key generated with the manifest (glovebox.key)")
	case m.KeyFingerprint == "":
		b.add("manifest: key_fingerprint is empty: regenerate the manifest with its key")
	case protocol.Fingerprint(key) != m.KeyFingerprint:
		b.add("GLOVEBOX_KEY does not match the manifest's key_fingerprint (%s): use the key generated with this manifest", m.KeyFingerprint)
	}
}

// checkEnv names each environment variable the manifest requires that
// is neither set nor given a default.
func (b *boot) checkEnv(m *protocol.Manifest, getenv func(string) string) {
	for _, name := range sortedKeys(m.Env) {
		spec := m.Env[name]
		if spec.Required && getenv(name) == "" && spec.Default == "" {
			b.add("missing required env var %s (declared in the manifest's env): set it or give it a default", name)
		}
	}
}

// storage registers the storage adapters: the built-in URL and local ones
// (the local one needs a writable state dir) and those opts adds, and
// checks the manifest's output policy against them.
func (b *boot) storage(s *Server) {
	m, opts, log := s.man, s.opts, s.log
	s.registry = storage.NewRegistry()
	uo := storage.URLOptions{Timeout: s.inputTimeout, Logger: log}
	if in := m.Inputs; in != nil {
		uo.AllowPrivate, uo.AllowLoopback = in.AllowPrivateURLs, in.AllowLoopbackURLs
	}
	s.registry.Register(protocol.AdapterURL, storage.NewURL(uo))
	s.openLocal(s.ctx, s.stateDir, s.machine, dirOK(s.stateDir), storage.LocalOptions{
		PublicURL: opts.PublicURL,
		Now:       opts.Now,
		Logger:    log,
		Inline:    m.Files != nil && m.Files.Inline,
	})
	b.phase("storage")
	for k, a := range opts.Adapters {
		if a == nil {
			b.add("storage: adapter %q is nil", k)
			continue
		}
		s.registry.Register(k, a)
	}
	if err := s.registry.ValidateOutputs(m.StoragePolicy.Outputs); err != nil {
		b.add("manifest: storage_policy.outputs: %v", err)
	}
}

// features builds the operator features and the handler that mounts
// their routes, with the bodies /health and /environment answer.
func (b *boot) features(s *Server, ring *logs.Ring, now func() time.Time) {
	m, log, opts := s.man, s.log, s.opts
	if opts.Inspect || m.Inspect != nil && m.Inspect.Enabled {
		s.inspect = inspect.New(b.inspectOptions(s, now))
	}
	s.uploads = upload.New(upload.Options{
		Auth: s.auth, Store: s.local, Max: s.maxInput, Dir: filepath.Join(s.stateDir, "uploads"),
		Now: now, Log: log, Sweep: opts.uploadSweep,
	})

	// Precomputed bodies, and the routes.
	hl := &health{auth: s.auth, drain: s.drain, environment: s.environmentBody, live: &s.live}
	body := protocol.Health{OK: true, Name: m.Name, Version: m.Version}
	hl.body, _ = json.Marshal(body)
	s.caps = append(slices.Clip(s.caps), fsCaps()...)
	env := m.Environment(s.caps)
	if iso := s.isolation(); iso != nil {
		body.Isolation, body.Degraded, body.Gaps = iso.Active, iso.Degraded, iso.Gaps
		env.Isolation = iso
	}
	hl.authBody, _ = json.Marshal(body)
	s.envBody, _ = json.Marshal(env)
	hl.drainBody, hl.drainAuth = drainingHealth(hl.body), drainingHealth(hl.authBody)
	s.handler = &handler{
		cors:    cors.New(m.HTTP, inspect.IsPath, log),
		machine: s.machine,
		preview: s.preview,
		routes:  b.mount(s, hl, ring),
		health:  hl.serve,
	}
}

// dirs checks the directories: every writable mount, and the input mount
// the kit writes inputs into, must exist and be writable, and so must
// the state directory.
func (b *boot) dirs(c *config, m *protocol.Manifest, opts Options) {
	c.mounts = make(map[string]string, len(m.FS))
	c.realMounts = make(map[string]string, len(m.FS))
	for _, k := range sortedKeys(m.FS) {
		mt := m.FS[k]
		if !filepath.IsAbs(filepath.FromSlash(mt.Path)) {
			continue // reported by m.Check
		}
		p := hostPath(opts.Root, mt.Path)
		c.mounts[k] = p
		if mt.Writable || k == protocol.MountInput {
			if err := ensureWritableDir(p); err != nil {
				b.add("fs.%s: %v", k, err)
			}
		}
		// Resolved once: each session's directory is made under it.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			c.realMounts[k] = real
		}
	}
	state := opts.StateDir
	if state == "" {
		state = DefaultStateDir
	}
	c.stateDir = hostPath(opts.Root, state)
	if err := ensureWritableDir(c.stateDir); err != nil {
		b.add("state dir: %v", err)
	}

}

// agentBaseEnv is the environment every session's agent starts from, and
// all of it: the kit's PATH, locale and CA variables, the manifest's env
// (values from the kit's environment, else their defaults) and agent.env.
// Nothing else of the kit's environment reaches an agent: not the box
// key, not storage credentials.
func agentBaseEnv(opts Options, m *protocol.Manifest, getenv func(string) string) []string {
	base := opts.Environ
	if base == nil {
		base = os.Environ()
	}
	set := map[string]string{}
	var order []string
	put := func(k, v string) {
		if _, ok := set[k]; !ok {
			order = append(order, k)
		}
		set[k] = v
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (opts.HostEnv || slices.Contains(passedEnv, k)) {
			put(k, v)
		}
	}
	if _, ok := set["PATH"]; !ok {
		put("PATH", "/usr/local/bin:/usr/bin:/bin")
	}
	for _, name := range sortedKeys(m.Env) {
		if v := getenv(name); v != "" {
			put(name, v)
		} else if d := m.Env[name].Default; d != "" {
			put(name, d)
		}
	}
	if a := m.Agent; a != nil {
		for _, k := range sortedKeys(a.Env) {
			put(k, a.Env[k])
		}
	}
	env := make([]string, 0, len(order)+4)
	for _, k := range order {
		if k == "GLOVEBOX_KEY" || k == "HOME" || strings.HasPrefix(k, "GLOVEBOX_") && isSessionVar(k) {
			continue
		}
		env = append(env, k+"="+set[k])
	}
	return env
}

func isSessionVar(k string) bool {
	switch k {
	case "GLOVEBOX_WORK", "GLOVEBOX_INPUT", "GLOVEBOX_OUTPUT", "GLOVEBOX_SESSION":
		return true
	}
	return false
}

// ensureWritableDir creates dir and checks that the kit may write in it.
func ensureWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, syscall.EACCES) && os.Geteuid() == 0 {
			return fmt.Errorf("cannot create %s: %w (the kit runs as root without CAP_DAC_OVERRIDE, its capabilities dropped: create it owned by root, or keep CAP_DAC_OVERRIDE)", dir, pathCause(err))
		}
		return fmt.Errorf("cannot create %s: %w", dir, pathCause(err))
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		if errors.Is(err, syscall.EACCES) && os.Geteuid() == 0 {
			return fmt.Errorf("%s is not writable: %w (the kit runs as root without CAP_DAC_OVERRIDE, its capabilities dropped: give the directory to root, or keep CAP_DAC_OVERRIDE)", dir, err)
		}
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	return nil
}

// pathCause strips the path from a *fs.PathError, whose message would
// repeat it.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func dirOK(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// mount builds the box's features and lists their routes in the order
// they are asked: a path's own route before a prefix that covers it, the
// WebSocket upgrade last (it takes any other path).
func (b *boot) mount(s *Server, hl *health, ring *logs.Ring) []route.Route {
	eg := &egressRoutes{e: s.egress, auth: s.auth, live: &s.live, done: s.ctx.Done()}
	mt := metrics.New(s.auth, s.obs, metrics.Sources{
		Kit: version.String(Version), Box: s.man.Name, BoxVersion: s.man.Version, Degraded: s.degraded,
		Sessions: s.live.sessionGauges,
		Parked:   func(ctx context.Context) (int64, int64) { return s.local.usage(ctx, s.log) },
		Uploads:  s.uploads.Usage,
		Egress:   s.egress.stats,
		Audit:    s.egress.auditStats,
	})
	sessions := &sessionsRoute{auth: s.auth, live: &s.live}
	sbom := &sbomRoute{auth: s.auth, prov: s.man.Provenance, log: s.log}
	runs := &runsRoute{auth: s.auth, runs: &s.runs, init: func() { s.runs.init(s) }}
	// A session's own features: /sessions/{id}/{feature} (session_routes.go).
	s.terms, s.procs = newTerminals(s), newProcesses(s)
	perSession := &sessionRoutes{auth: s.auth, live: &s.live, features: slices.Concat(
		[]sessionFeature{
			s.terms.feature(),
			s.procs.feature(),
			fsFeature(s.log),
			s.preview.feature(),
		},
		s.snaps.features(), // snapshots.go
	)}
	return slices.Concat(
		hl.routes(),
		sbom.routes(),
		eg.routes(),
		mt.Routes(),
		sessions.routes(),
		runs.routes(),
		perSession.routes(),
		s.snaps.routes(),
		ring.Routes(s.auth, s.ctx.Done()),
		files.New(s.auth, s.local, s.log).Routes(),
		s.uploads.Routes(),
		s.inspect.Routes(),
		[]route.Route{{Match: wsconn.IsUpgrade, Serve: s.serveWS}},
	)
}
