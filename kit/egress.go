package kit

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The egress proxy. Where the sandbox gives sessions network namespaces
// of their own, every box runs one egress.Proxy and it is a session's only
// way out (enforced): each sandboxed process's namespace has loopback and
// a listener on 127.0.0.1:3128 made inside it, which the proxy serves.
// Elsewhere a box whose manifest has a network policy or a brokered secret
// (env inject) runs one, and each session gets a loopback TCP port its
// agents are told about through HTTP_PROXY and friends. The session's
// sandbox is asked to confine its processes to that port (ConfineNet):
// where Landlock and seccomp do (Report.ConfinesEgress), the proxy is
// again the only way out (enforced); elsewhere nothing stops a process
// that ignores the variables (advisory), /environment says so, and the
// kit serves such a box only when its operator allowed it (isolation.go).
//
// Brokered secrets never enter an agent's environment: it gets their
// placeholders. Every decision is logged and sent to the session's client
// as an "egress" event on the running prompt. POST /egress (the key or an
// admin token) replaces the policy; new connections follow it at once.

// Egress modes, as /environment reports them.
const (
	EgressAdvisory = "advisory"
	EgressEnforced = "enforced"
)

// EgressOptions are seams for tests: a resolver, a dialer, the roots
// that verify brokered hosts and the address guard (a test opens its
// hosts' range there). Zero values mean the system's.
type EgressOptions struct {
	Guard   *netguard.Guard
	Resolve egress.Resolver
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	RootCAs *x509.CertPool
	// Audit bounds the audit trail (its Dir is the state dir's
	// egress-audit unless set).
	Audit egress.JournalOptions
}

// kitEgress is a Server's egress proxy and what /environment shows of it.
type kitEgress struct {
	proxy   *egress.Proxy
	mode    string
	netns   bool                 // sessions have network namespaces: a listener inside each
	bundle  string               // the CA bundle agents trust
	base    protocol.Environment // /environment's fields but the network, made at boot
	envBody atomic.Pointer[[]byte]
	log     *slog.Logger
	audit   *egress.Journal // the audit trail (audit_route.go)
	asks    sync.Map        // session id -> *sessionAsks (egress_ask.go)
	polMu   sync.Mutex      // orders the policy's replacements (POST /egress, approvals for the box)
	// listen opens a session's listener, where sessions have no network
	// namespace, and names the host:port its agents reach it at: a
	// loopback TCP port, to which the session's sandbox confines them
	// where it can.
	listen func(sessionID string) (ln net.Listener, addr string, err error)
}

// listenLoopback is the advisory listener: a loopback TCP port.
func listenLoopback(string) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	return ln, ln.Addr().String(), nil
}

// egressPreamble tells the agent how its network behaves when the box
// runs an egress proxy (a policy, a brokered secret, or a sandbox whose
// sessions have network namespaces): "" otherwise.
func egressPreamble(m *protocol.Manifest, proxied bool) string {
	if !proxied {
		return ""
	}
	brokered := false
	for _, e := range m.Env {
		brokered = brokered || e.Inject != nil
	}
	l := "Network: every connection goes through the box's egress proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY are set). " +
		"A blocked connection answers HTTP 451 (SOCKS: not allowed by ruleset) with the host and the rule that blocked it: " +
		"do not retry it; tell the user, who can allow it in glovebox.toml [network]."
	if brokered {
		l += " API keys in your environment are placeholders the proxy replaces on the way out; use them as they are."
	}
	return l
}

// egress is boot's egress phase: it builds the proxy from the manifest, writes the CA bundle
// agents trust, and puts placeholders in place of brokered secrets in the
// agents' base environment.
func (b *boot) egress(s *Server) {
	m := s.man
	var secrets []egress.Secret
	for _, name := range sortedKeys(m.Env) {
		spec := m.Env[name]
		if spec.Inject == nil {
			continue
		}
		v := s.getenv(name)
		if v == "" {
			v = spec.Default
		}
		secrets = append(secrets, egress.Secret{Name: name, Value: v, Hosts: spec.Inject.Hosts, Header: spec.Inject.Header, Port: spec.Inject.Port,
			Form: spec.Inject.Form, User: spec.Inject.User})
	}
	// Where sessions have network namespaces of their own the proxy is
	// their only way out, so every box runs one (allowing what the policy
	// allows, by default everything but the addresses package netguard
	// closes: this host, link-local, metadata, private and special-purpose
	// ranges); elsewhere only a box with a policy or a brokered secret
	// does, and agents are told to use it.
	netns := s.sb != nil && s.sb.Report().Has(sandbox.LayerNetwork)
	if m.Network == nil && len(secrets) == 0 && !netns {
		return
	}
	spec := protocol.NetworkSpec{}
	if m.Network != nil {
		spec = *m.Network
	}
	pol, err := egress.NewPolicy(spec)
	if err != nil {
		b.add("manifest: network: %v", err)
		return
	}
	eo := s.opts.Egress
	audit := openAudit(s.opts.Egress.Audit, s.stateDir, s.log)
	p, err := egress.New(egress.Options{
		Policy: pol, Secrets: secrets, Seed: m.KeyFingerprint,
		Guard: eo.Guard, Resolve: eo.Resolve, Dial: eo.Dial, RootCAs: eo.RootCAs,
		Logger: s.log, Now: s.opts.Now, Audit: audit,
	})
	if err != nil {
		audit.Close()
		b.add("egress proxy: %v", err)
		return
	}
	e := &kitEgress{proxy: p, mode: EgressAdvisory, netns: netns, listen: listenLoopback, audit: p.Audit(), log: s.log}
	if s.sb != nil && s.sb.Report().ConfinesEgress() {
		e.mode = EgressEnforced
	}
	dir := filepath.Join(s.stateDir, "egress")
	e.bundle = filepath.Join(dir, "ca-bundle.crt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.add("egress proxy: %v", err)
		return
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		b.add("egress proxy: %v", err)
		return
	}
	if err := p.WriteBundle(e.bundle, egress.SystemBundle(s.getenv)); err != nil {
		b.add("egress proxy: write the CA bundle: %v", err)
		return
	}
	// The real values never reach an agent: whether they came from the
	// manifest's env or the kit's own environment, agents get placeholders.
	ph := p.Placeholders()
	for i, kv := range s.baseEnv {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := ph[k]; ok {
			s.baseEnv[i] = k + "=" + v
		}
	}
	s.caps = append(slices.Clip(s.caps), protocol.CapEgress, protocol.CapEgressRules)
	e.base = s.man.Environment(s.caps)
	e.base.Isolation = s.isolation()
	s.egress = e
	e.refresh()
	s.log.Info("egress proxy", "mode", e.mode, "default", pol.Spec().Default, "allow", len(spec.Allow), "deny", len(spec.Deny), "brokered", p.Brokered())
}

// refresh recomputes the /environment body for the policy in force.
func (e *kitEgress) refresh() {
	env := e.base
	env.Network = e.view()
	body, _ := json.Marshal(env)
	e.envBody.Store(&body)
}

func (e *kitEgress) view() *protocol.EgressEnvironment {
	spec := e.proxy.Policy().Spec()
	return &protocol.EgressEnvironment{
		Mode: e.mode, Default: spec.Default,
		Allow: nonNil(spec.Allow), Deny: nonNil(spec.Deny),
		Brokered:      e.proxy.Brokered(),
		AllowRequests: spec.AllowRequests, SessionMayAllow: spec.SessionMayAllow,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// egressEnv starts the session's proxy listener, the first time, and
// returns the variables its agents need; none when the box has no proxy.
func (ss *session) egressEnv(box *sandbox.Session) ([]string, error) {
	e := ss.srv.egress
	if e == nil {
		return nil, nil
	}
	sess := egress.Session{ID: ss.id, Sink: ss.egressEvent, Ask: ss.askEgress, Rules: &ss.egressRules}
	if e.netns {
		// The session's network namespace (one per supervisor of the
		// session) has a listener of its own, made inside it; the proxy
		// serves each for the session.
		box.OnListener = func(ln net.Listener) {
			ss.srv.wg.Add(1)
			go func() {
				defer ss.srv.wg.Done()
				if err := e.proxy.Serve(ss.ctx, ln, sess); err != nil {
					ss.logger().Error("egress proxy stopped", "err", err)
				}
			}()
		}
		return e.proxy.Env(sandbox.DefaultProxyAddr, e.bundle), nil
	}
	ln, addr, err := e.listen(ss.id)
	if err != nil {
		return nil, codeErr(protocol.CodeError, fmt.Errorf("start the session's egress proxy: %w", err))
	}
	// The session's processes may connect to this port only, where the
	// sandbox can see to it (Landlock's TCP rules and seccomp).
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		box.ConfineNet, box.EgressPort = true, a.Port
	}
	ss.srv.wg.Add(1)
	go func() {
		defer ss.srv.wg.Done()
		if err := e.proxy.Serve(ss.ctx, ln, sess); err != nil {
			ss.logger().Error("egress proxy stopped", "err", err)
		}
	}()
	return e.proxy.Env(addr, e.bundle), nil
}

// egressEvent logs an egress decision and sends it to the client on the
// running prompt, if there is one.
func (ss *session) egressEvent(ev egress.Event) {
	lvl := ss.logger().Info
	if ev.Decision != egress.Allow {
		lvl = ss.logger().Warn
	}
	lvl("egress", "proto", ev.Proto, "host", ev.Host, "port", ev.Port, "decision", ev.Decision, "rule", ev.Rule,
		"bytes_out", ev.BytesOut, "bytes_in", ev.BytesIn, "brokered", ev.Brokered, "stripped", ev.Stripped)
	if t := ss.prompts.turnNow.Load(); t != nil {
		t.Emit(protocol.EventEgress, ev) // a prompt that just ended no longer takes events
	}
}

// egressRoutes serve the box's egress policy and audit trail: /egress,
// /egress/log (audit_route.go) and /sessions/{id}/egress
// (egress_session.go). Without a proxy (e nil) they answer 404 and say
// how to get one.
type egressRoutes struct {
	e    *kitEgress
	auth *auth
	live *live
	done <-chan struct{} // ends /egress/log's followers
}

func (er *egressRoutes) routes() []route.Route {
	return []route.Route{
		route.Path("/egress", er.serveEgress),
		route.Path("/egress/log", er.serveEgressLog),
		{Match: func(r *http.Request) bool {
			p := r.URL.Path
			return strings.HasPrefix(p, "/sessions/") && strings.HasSuffix(p, "/egress") && strings.Count(p, "/") == 3
		}, Serve: func(w http.ResponseWriter, r *http.Request) {
			er.serveSessionEgress(w, r, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/sessions/"), "/egress"))
		}},
	}
}

// serveEgress is the admin route: GET shows the policy, POST or PUT
// replaces it with the JSON body {"default","allow","deny"}.
func (er *egressRoutes) serveEgress(w http.ResponseWriter, r *http.Request) {
	if !er.auth.Admit(w, r, protocol.ScopeAdmin) {
		return
	}
	e := er.e
	if e == nil {
		http.Error(w, "this box has no egress proxy: add a [network] table to glovebox.toml", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost, http.MethodPut:
		spec, ok := readNetworkSpec(w, r, "policy")
		if !ok {
			return
		}
		pol, err := egress.NewPolicy(spec)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.polMu.Lock()
		e.proxy.SetPolicy(pol)
		e.refresh()
		e.polMu.Unlock()
		e.log.Warn("egress policy changed at runtime", "default", pol.Spec().Default, "allow", spec.Allow, "deny", spec.Deny)
	default:
		route.MethodNotAllowed(w, "GET, HEAD, POST, PUT")
		return
	}
	out, _ := json.Marshal(e.view())
	route.Body(w, r, "application/json", "no-store", out)
}

// stats returns the proxy's counters; zero when e is nil (no proxy).
func (e *kitEgress) stats() egress.Stats {
	if e == nil {
		return egress.Stats{}
	}
	return e.proxy.Stats()
}

// readNetworkSpec reads a request's body as a network policy (what names
// it in errors: "policy", "rules"), strictly and at most 1 MB; on a bad
// body it answers 400 and reports false.
func readNetworkSpec(w http.ResponseWriter, r *http.Request, what string) (protocol.NetworkSpec, bool) {
	var spec protocol.NetworkSpec
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil || len(body) > 1<<20 {
		http.Error(w, "the "+what+" must be JSON of at most 1MB", http.StatusBadRequest)
		return spec, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		http.Error(w, `the `+what+` is not {"default": ..., "allow": [...], "deny": [...], "allow_requests": [...]}: `+err.Error(), http.StatusBadRequest)
		return spec, false
	}
	return spec, true
}
