package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/builtin"
	"github.com/glovebox-dev/glovebox/protocol"
)

// localBox is a box served in process, without a container: the kit with
// its directories re-rooted under a local state directory.
type localBox struct {
	URL  string // ws://host:port/
	Key  string
	Root string
	srv  *kit.Server
	done chan error // Serve's result

	closeOnce sync.Once
	closeErr  error
}

type localBoxOptions struct {
	Manifest *protocol.Manifest
	Key      string
	Root     string // the box's / on this machine
	Addr     string // listen address, e.g. 127.0.0.1:8080
	// PublicURL is the base URL of server refs; default http://Addr.
	PublicURL string
	Getenv    func(string) string
	Logger    *slog.Logger
	// Environ is what agents' variables come from (nil: this process's);
	// HostEnv passes all of it; Inspect serves the inspector.
	Environ []string
	HostEnv bool
	Inspect bool
	// AllowDegraded serves where the sandbox cannot keep sessions apart
	// (sandbox.allow_degraded): for a box on the developer's own machine.
	AllowDegraded bool
}

// startLocalBox boots a box with the agent its manifest names and serves
// it until ctx ends or Close.
func startLocalBox(ctx context.Context, o localBoxOptions) (*localBox, error) {
	ag, err := localAgent(o.Manifest, o.Logger)
	if err != nil {
		return nil, err
	}
	return startLocalBoxWith(ctx, o, ag)
}

// startLocalBoxWith boots a box with the given agent.
func startLocalBoxWith(ctx context.Context, o localBoxOptions, ag agent.Agent) (*localBox, error) {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (pick another with --addr)", o.Addr, err)
	}
	addr := reachable(ln.Addr().(*net.TCPAddr))
	public := o.PublicURL
	if public == "" {
		public = "http://" + addr
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	// The same storage adapters as glovebox-kit: s3 from the environment.
	adapters, err := kit.EnvAdapters(getenv, o.Manifest, o.Logger)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("boot the box:\n%w", err)
	}
	m := o.Manifest
	if o.AllowDegraded {
		m = allowDegraded(m)
	}
	srv, err := kit.New(kit.Options{
		Adapters:  adapters,
		Manifest:  m,
		Key:       o.Key,
		Root:      o.Root,
		PublicURL: public,
		Agent:     ag,
		Logger:    o.Logger,
		Getenv:    o.Getenv,
		Environ:   o.Environ,
		HostEnv:   o.HostEnv,
		Inspect:   o.Inspect,
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("boot the box:\n%w", err)
	}
	b := &localBox{URL: "ws://" + addr + "/", Key: o.Key, Root: o.Root, srv: srv, done: make(chan error, 1)}
	go func() { b.done <- srv.Serve(ctx, ln) }()
	return b, nil
}

// Close stops the box: sessions end, agents stop, storage closes. It
// returns once Serve has returned; later calls return the same error.
func (b *localBox) Close() error {
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := b.srv.Close(ctx)
		if serr := <-b.done; serr != nil && !errors.Is(serr, kit.ErrClosed) && !errors.Is(serr, context.Canceled) {
			err = errors.Join(err, serr)
		}
		b.closeErr = err
	})
	return b.closeErr
}

// reachable is addr as a client on this machine dials it: a wildcard
// listen address becomes loopback.
func reachable(a *net.TCPAddr) string {
	if a.IP == nil || a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return a.String()
}

// localAgent returns the agent the manifest names: a built-in one
// (builtin.Resolve, as glovebox-kit serves), else an error saying how to
// run it.
func localAgent(m *protocol.Manifest, log *slog.Logger) (agent.Agent, error) {
	ag, err := builtin.Resolve(m, log)
	if !errors.Is(err, builtin.ErrNotBuiltin) {
		return ag, err
	}
	if t := m.AgentType(); t != protocol.AgentGo {
		return nil, fmt.Errorf("agent type %q is not one of exec, acp, go", t)
	}
	return nil, errors.New("this box's agent is a Go agent (agent.type \"go\"): it runs from its own main package, so start it with `go run .` instead of gbx dev")
}
