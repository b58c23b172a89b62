package kit

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/kit/metrics"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/kit/upload"
	"github.com/glovebox-dev/glovebox/protocol"
)

// DefaultStateDir is where the kit keeps its own state (the local file
// store) inside a box.
const DefaultStateDir = "/var/glovebox"

// Defaults for the manifest's optional limits and sessions fields.
const (
	DefaultMaxMessage   = 100 * protocol.MB
	DefaultMaxInput     = protocol.GB
	DefaultInputTimeout = 60 * time.Second
	DefaultMaxSessions  = 10000
	DefaultMaxQueue     = 16
	DefaultResumeGrace  = 60 * time.Second
	// DefaultPersistGrace is resume_grace where sessions persist and the
	// manifest names none.
	DefaultPersistGrace = 24 * time.Hour
	DefaultPingInterval = 30 * time.Second
)

// Options configure a Server.
type Options struct {
	// Manifest is the box's glovebox.json. Required.
	Manifest *protocol.Manifest
	// ManifestDigest is the SHA-256 (hex) of the manifest's bytes, which
	// run records name (runs.go). Empty: that of Manifest's JSON encoding.
	ManifestDigest string
	// Key is the box key clients present as a bearer token. It must match
	// the manifest's key_fingerprint.
	Key string
	// Root re-roots every fs path of the manifest and the state directory,
	// so that a box runs outside a container: with Root "/tmp/box" the
	// work mount /work is /tmp/box/work. Empty means the real root.
	Root string
	// StateDir holds the kit's own state (the local file store's SQLite
	// database and files). Default /var/glovebox. It is re-rooted under
	// Root like the fs paths.
	StateDir string
	// PublicURL is the base URL clients reach the box at; server FileRefs
	// point at PublicURL + "/files/<id>". Empty gives relative URLs.
	PublicURL string
	// Agent serves the sessions. Required.
	Agent agent.Agent
	// Adapters are storage adapters to add to the built-in inline, url and
	// localServer ones, by registry key; a key that names a built-in
	// replaces it (the /files route always serves the built-in store).
	Adapters map[string]storage.Adapter
	// Logger receives the kit's logs. Nil discards them.
	Logger *slog.Logger
	// Getenv reads the environment (required env vars, their defaults).
	// Nil means os.Getenv. An empty value counts as unset.
	Getenv func(string) string
	// Environ is the kit's environment, which the manifest's env values
	// and the variables agents may see (PATH, locale, CA files) are taken
	// from. Nil means os.Environ(). Nothing else of it reaches agents: not
	// the box key, not storage credentials.
	Environ []string
	// Now is the clock of the file store's TTLs and of token expiry. Nil
	// means time.Now.
	Now func() time.Time
	// MaxTerminals and MaxProcesses bound a session's terminals and
	// processes at once (ended ones count until dropped for a new one);
	// 0 is DefaultMaxTerminals, DefaultMaxProcesses.
	MaxTerminals, MaxProcesses int
	// PingInterval is how often the kit pings an idle client; a client
	// silent for twice as long is dropped. Default 30s.
	PingInterval time.Duration
	// runnerLinger shortens how long an idle prompt runner waits, for
	// tests (default runnerLinger).
	runnerLinger time.Duration
	// parkAfter replaces how long a reader that handled a frame waits for
	// the next before it parks its connection, for tests (default
	// parkAfter).
	parkAfter time.Duration
	// memoryQuiet and collect replace memoryQuiet and debug.FreeOSMemory
	// (memory.go), for tests.
	memoryQuiet time.Duration
	collect     func()
	// uploadSweep replaces how often idle partial uploads are looked for
	// (kit/upload), for tests.
	uploadSweep time.Duration
	// Egress holds test seams for the egress proxy (kit/egress.go).
	Egress EgressOptions
	// HostEnv passes all of Environ to agents (but GLOVEBOX_KEY and the
	// session's own GLOVEBOX_* variables), not only PATH, locale and CA
	// variables: gbx dev --host-env, for an author's own machine.
	HostEnv bool
	// Inspect serves the inspector at /inspect (kit/inspect) whatever
	// the manifest says; gbx dev sets it.
	Inspect bool
	// monitor, when set, is the socket to the root monitor of a
	// privilege-separated kit (privsep_linux.go): the server is its
	// unprivileged front, and its sandbox is the monitor's (sandbox.Dial).
	monitor *os.File
}

// Server is a running box. It is an http.Handler factory plus the sessions
// it serves; Close ends them.
type Server struct {
	opts    Options
	man     *protocol.Manifest
	config           // what boot read and set up; fixed while the box serves (config.go)
	auth    *auth    // the key and tokens minted from it (auth.go)
	handler *handler // the routes, mounted at boot (handler.go)

	stores // the registry of storage adapters and the built-in store (store.go)

	budget  *budgets           // frames being read, replay buffers (budget.go)
	drain   *drain             // the graceful shutdown (drain.go)
	envBody []byte             // GET /environment's body as boot made it
	egress  *kitEgress         // nil: no proxy
	inspect *inspect.Inspector // nil: no inspector (kit/inspect)
	uploads *upload.Uploads    // /uploads (kit/upload)
	preview *previews          // preview ports (preview.go)
	obs     *metrics.Counters  // counted for /metrics (kit/metrics)
	warm    *warmPool          // nil: no warm sessions
	memory  *memoryReturner    // returns a burst's garbage (memory.go)
	runs    runRecorder        // signed run records (runs.go)
	terms   *terminals         // sessions' terminals (terminal.go)
	procs   *processes         // sessions' processes (processes.go)
	snaps   *snapshots         // snapshots, restores, forks (snapshots.go); nil: no store

	ctx    context.Context // ends when Close starts
	cancel context.CancelCauseFunc

	live // sessions, connections and listeners, under one lock (live.go)
}

// pingLoop pings every connection each ping interval; a connection that
// stays silent for two intervals is dropped by its reader.
func (s *Server) pingLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.pingInterval)
	defer t.Stop()
	var conns []*conn
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		conns = conns[:0]
		s.mu.Lock()
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		// A parked connection whose deadline passed wakes to meet it.
		now := time.Now().UnixNano()
		p := s.parker.Load()
		for i, c := range conns {
			c.ping()
			if p != nil && now >= c.readBy.Load() {
				p.wake(c)
			}
			conns[i] = nil
		}
	}
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("kit: server closed")

// errShutdown is the cause of every cancellation Close makes.
var errShutdown = errors.New("kit: server shutting down")

// New checks the options and prepares a Server. On failure the error is a
// *BootError listing every problem found, one line each.
func New(opts Options) (*Server, error) {
	b := &boot{}
	s := b.run(opts)
	if err := b.err(); err != nil {
		if s != nil {
			s.cancel(err)
			s.stores.close()
		}
		return nil, err
	}
	s.restoreSessions() // persist.go
	if s.persist {
		s.wg.Add(1)
		go s.heartbeat()
	}
	s.wg.Add(1)
	go s.pingLoop()
	if s.inspect != nil {
		s.live.startSampling(s.ctx.Done()) // resources.go
	}
	if n := s.man.Agent.WarmSize(); n > 0 {
		s.warm = newWarmPool(s, n)
	}
	return s, nil
}

// Drain starts a graceful shutdown and waits for the box to go quiet: the
// box takes no new sessions (an upgrade gets 503 with Retry-After, and
// /health answers 503 with "draining": true, so that load balancers send
// new sessions elsewhere) and no new prompts on the sessions it has (they
// get an error frame with code Draining); every connected client gets a
// draining frame with the deadline; the prompts already running or queued
// go on, and their outputs are stored as usual. Drain returns nil once no
// session runs or queues a prompt, or ctx's error when ctx ends first
// (its deadline is the drain time: the manifest's sessions.drain in Main).
// Close then ends what is left. Calling Drain again waits again.
func (s *Server) Drain(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.man.DrainTime())
	}
	return s.drain.run(ctx, deadline)
}

// EgressStats returns the egress proxy's counters (zero without one).
func (s *Server) EgressStats() egress.Stats { return s.egress.stats() }

// WarmStats returns the warm pool's counters.
func (s *Server) WarmStats() WarmStats {
	p := s.warm
	if p == nil {
		return WarmStats{}
	}
	p.mu.Lock()
	st := WarmStats{Size: p.size, Ready: len(p.ready), Starting: p.starting}
	p.mu.Unlock()
	st.Taken, st.Missed = p.taken.Load(), p.missed.Load()
	st.Replaced, st.Failed = p.replaced.Load(), p.failed.Load()
	return st
}

// environmentBody is the body of GET /environment.
func (s *Server) environmentBody() []byte {
	body := s.envBody
	if s.egress != nil {
		body = *s.egress.envBody.Load()
	}
	return s.warm.environment(body)
}

// BootError lists every problem that keeps a box from starting.
type BootError struct {
	Problems []string
}

func (e *BootError) Error() string { return strings.Join(e.Problems, "\n") }

// Handler returns the box's HTTP handler: the routes the package doc
// lists, and the WebSocket upgrade on any other path.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on ln until ctx ends or Close is called. It
// returns nil after a shutdown it was asked for.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	g := newGate(ln, s.maxConns, s.handler.health, s.log)
	ln = g
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ConnState:         g.connState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	s.servers = append(s.servers, hs)
	s.gates = append(s.gates, g)
	s.mu.Unlock()

	stop := context.AfterFunc(ctx, func() { hs.Close() })
	defer stop()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving: it cancels every running and queued prompt, sends
// each client a close frame (1001, going away), waits for the sessions to
// end and closes storage. When ctx ends first, remaining connections are
// cut and Close returns ctx's error after the same cleanup; an agent that
// ignores cancellation is then left running (and logged).
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	servers := s.servers
	sessions := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()

	for _, hs := range servers {
		hs.Close() // stops listening; hijacked connections are ours
	}
	s.cancel(errShutdown)
	s.memory.stop()
	s.uploads.Close()

	var wg sync.WaitGroup
	wg.Go(s.warm.close)
	for _, ss := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss.end(errShutdown)
			ss.stream.goingAway()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		// No session starts once closed is set: these are all of them.
		for _, ss := range sessions {
			ss.stream.kill()
		}
		// An agent that ignores cancellation would hold Close forever.
		t := time.NewTimer(time.Second)
		select {
		case <-done:
		case <-t.C:
			s.log.Error("closing: prompts still running after the deadline; an agent ignores cancellation")
		}
		t.Stop()
	}
	// Every connection has ended (or was cut above): none is parked.
	if p := s.parker.Load(); p != nil {
		p.stop()
	}
	if s.egress != nil && s.egress.audit != nil {
		s.egress.audit.Close()
	}
	// Its sessions have ended: the sandbox's held directories (and, in a
	// front, its socket to the monitor) go with it.
	if s.sb != nil {
		s.sb.Close()
	}
	if cerr := s.stores.close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// hostPath maps an absolute box path to the host under Root.
func hostPath(root, p string) string {
	if root == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(root, filepath.FromSlash(p))
}

// capabilities this kit announces.
var capabilities = []string{
	protocol.CapSeq,
	protocol.CapResume,
	protocol.CapOrdered,
	protocol.CapCancelQueued,
	protocol.CapSessions,
	protocol.CapSubprotocol,
	protocol.CapTokens,
	protocol.CapDrain,
	protocol.CapTerminals,
	protocol.CapProcesses,
}
