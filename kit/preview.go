package kit

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Preview ports (protocol/preview.go): a port a session's process listens
// on, served at <link id>.<preview domain> to holders of a link minted by
// POST /sessions/{id}/previews.
//
// Origins: a preview serves the agent's HTML and JS, so it never shares an
// origin with the box's own pages (the inspector's cookie, the routes a
// bearer reaches): previews live only under the manifest's preview domain,
// each link on a host of its own, and no request to a host under that
// domain ever reaches a route of the box. The link's cookie is host-only
// (no Domain), HttpOnly, SameSite=Lax, Secure over https.
//
// Reaching the port. Where sessions have a network namespace of their own
// (mode "netns"), the session's helper (kit/sandbox) connects from inside
// it, as the session, and hands the kit the connected socket: any port the
// session listens on can be previewed, and no other session's can be
// reached. Where they share the host's loopback (mode "port": the
// Docker-like and non-root platforms), each session gets one port of its
// own from GLOVEBOX_PREVIEW_PORTS (default 20000-29999), in $PORT and
// $GLOVEBOX_PREVIEW_PORT, the only port it may listen on (its Landlock
// domain, ABI 4 and later, refuses every other bind, and every other
// session's domain refuses that one), and only that port can be
// previewed; the kit connects to 127.0.0.1:PORT itself and, where sessions
// have uids of their own, checks in /proc/net/tcp that the socket that
// accepted the connection is the session uid's, so a squatter's listener
// is never reached. Where neither holds (no network namespace, no Landlock
// network rules, no uid per session) the box serves no previews and does
// not announce CapPreview.
//
// Bounds: at most maxPreviewLinks live links per session (and
// maxPreviewKept with the revoked ones it keeps until they expire), and
// maxPreviewConns connections to its ports at a time; a response's
// headers within previewHeaderTimeout; bodies stream both ways (no
// buffering of a whole body), and WebSocket upgrades are spliced. Every
// connection to a session's ports ends with the session.

const (
	maxPreviewLinks      = 32
	maxPreviewKept       = 4 * maxPreviewLinks // live and revoked, per session
	maxPreviewConns      = 64
	previewDialTimeout   = 10 * time.Second
	previewHeaderTimeout = 2 * time.Minute
	previewIdleTimeout   = 30 * time.Second
	maxPreviewRequest    = 4 << 10
)

// sessionDialer connects to port in ss as ss: the session's own loopback.
type sessionDialer func(ctx context.Context, ss *session, port int) (net.Conn, error)

// previews serves preview links: minting, listing and revoking them under
// /sessions/{id}/previews, and proxying requests to their hosts.
type previews struct {
	key    string
	domain string // "preview.example.com"
	scheme string // "https", or "http" with PreviewSpec.HTTP
	port   string // ":8080" when the box's public URL names a port, else ""
	// machine is this Fly machine's id (fly.go): a link to another
	// machine's session is replayed there.
	machine string
	live    *live
	now     func() time.Time
	log     *slog.Logger
	dial    sessionDialer
	// off says why the box serves no previews; "" when it does.
	off string
	// ports, in mode "port", are the sessions' own ports; nil in mode
	// "netns", where a session listens on any port of its own loopback.
	ports *previewPorts

	mu    sync.Mutex
	links map[string]*previewLink // by id: live and revoked links
	conns map[*session]*previewConns
}

// previewLink is a minted link. A revoked one stays until it expires, so
// that it answers 410 rather than 401.
type previewLink struct {
	p       protocol.Preview // without Link
	ss      *session
	revoked bool
}

// previewConns are a session's connections to its ports: the transport
// that pools them, a semaphore bounding them, and the open ones, closed
// when the session ends.
type previewConns struct {
	tr   *http.Transport
	sem  chan struct{}
	mu   sync.Mutex
	open map[*previewConn]struct{}
	done bool
}

// newPreviews builds the feature for m; off says why it serves nothing.
func newPreviews(s *Server, now func() time.Time) *previews {
	p := &previews{
		key: s.opts.Key, live: &s.live, now: now, log: s.log.With("feature", "preview"),
		links: map[string]*previewLink{}, conns: map[*session]*previewConns{},
		dial: helperDial, machine: s.machine,
	}
	spec := s.man.Preview
	if spec == nil {
		p.off = "this box serves no previews: set [preview] domain in glovebox.toml (a wildcard DNS name pointing at the box)"
		return p
	}
	// Hosts under the domain are the previews' even when the box serves
	// none: never the box's own routes.
	p.domain, p.scheme = spec.Domain, "https"
	if spec.HTTP {
		p.scheme = "http"
	}
	if u, err := url.Parse(s.opts.PublicURL); err == nil && u.Port() != "" {
		p.port = ":" + u.Port()
	}
	if s.sb == nil {
		p.off = "this box has no sandbox to reach a session's ports through"
		return p
	}
	r := s.sb.Report()
	switch {
	case r.Has(sandbox.LayerNetwork):
		return p
	case !(r.Has(sandbox.LayerLandlock) && r.Landlock >= 4) && !r.Has(sandbox.LayerUsers):
		p.off = "this box's sessions share the host's loopback (no network namespace: " + r.Inactive[sandbox.LayerNetwork] + ") with neither Landlock's network rules (ABI 4) nor a uid each: a preview could not tell one session's listening port from another's, so the box serves no previews"
		return p
	}
	ports, err := parsePreviewPorts(s.getenv("GLOVEBOX_PREVIEW_PORTS"))
	if err != nil {
		p.off = "GLOVEBOX_PREVIEW_PORTS: " + err.Error()
		return p
	}
	p.ports = ports
	p.dial = p.portDial
	return p
}

// enabled reports whether the box serves previews.
func (p *previews) enabled() bool { return p.off == "" }

// feature is /sessions/{id}/previews.
func (p *previews) feature() sessionFeature {
	return sessionFeature{name: "previews", scope: protocol.ScopePreview, serve: p.serveSession}
}

func (p *previews) serveSession(w http.ResponseWriter, r *http.Request, ss *session, rest string) {
	if !p.enabled() {
		http.Error(w, p.off, http.StatusNotImplemented)
		return
	}
	switch {
	case rest == "" && r.Method == http.MethodPost:
		p.mint(w, r, ss)
	case rest == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		list := protocol.PreviewList{Previews: p.list(ss)}
		body, _ := json.Marshal(list)
		route.JSON(w, r, body)
	case rest == "":
		route.MethodNotAllowed(w, "GET, HEAD, POST")
	case r.Method == http.MethodDelete:
		id := strings.TrimPrefix(rest, "/")
		if !p.revoke(ss, id) {
			http.Error(w, "no preview link "+id+" in this session (GET /sessions/"+ss.id+"/previews lists them)", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		route.MethodNotAllowed(w, "DELETE")
	}
}

// mint answers POST: a new link to the session's port.
func (p *previews) mint(w http.ResponseWriter, r *http.Request, ss *session) {
	var req protocol.PreviewRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxPreviewRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `body: want {"port":N,"ttl":"1h"}: `+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Port < 1 || req.Port > 65535 {
		http.Error(w, fmt.Sprintf("port %d: want a TCP port from 1 to 65535", req.Port), http.StatusBadRequest)
		return
	}
	ttl := protocol.DefaultPreviewTTL
	if req.TTL != "" {
		d, err := protocol.ParseDuration(req.TTL)
		if err != nil {
			http.Error(w, "ttl: "+err.Error(), http.StatusBadRequest)
			return
		}
		ttl = d
	}
	if ttl > protocol.MaxPreviewTTL {
		http.Error(w, fmt.Sprintf("ttl %s: at most %s", req.TTL, protocol.MaxPreviewTTL), http.StatusBadRequest)
		return
	}
	if ss.ctx.Err() != nil {
		http.Error(w, "the session has ended", http.StatusGone)
		return
	}
	if p.ports != nil {
		info, err := ss.sandboxed()
		if err != nil {
			http.Error(w, err.Error(), http.StatusGone)
			return
		}
		if own := info.Sandbox.ListenPort; req.Port != own {
			http.Error(w, fmt.Sprintf("port %d: this box's sessions share the host's loopback, and each listens on its own port only: this one's is %d ($PORT in the session)", req.Port, own), http.StatusBadRequest)
			return
		}
	}
	now := p.now()
	c := protocol.PreviewClaims{ID: newPreviewID(), Session: ss.id, Port: req.Port, Expires: now.Add(ttl).Truncate(time.Second).UTC()}
	link, err := protocol.MintPreviewLink(p.key, c)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pv := protocol.Preview{ID: c.ID, Session: c.Session, Port: c.Port, URL: p.origin(c.ID) + "/", Expires: c.Expires}
	p.mu.Lock()
	p.prune(now)
	live, revoked := 0, 0
	for _, l := range p.links {
		switch {
		case l.ss != ss:
		case l.revoked:
			revoked++
		default:
			live++
		}
	}
	switch {
	case live >= maxPreviewLinks:
		p.mu.Unlock()
		http.Error(w, fmt.Sprintf("the session has %d live preview links, the most it may: revoke one (DELETE /sessions/%s/previews/{id})", live, ss.id), http.StatusTooManyRequests)
		return
	case live+revoked >= maxPreviewKept:
		// A revoked link is kept until it expires, to answer 410.
		p.mu.Unlock()
		http.Error(w, fmt.Sprintf("the session has %d preview links, revoked ones included, which the box keeps until they expire: mint shorter-lived links", live+revoked), http.StatusTooManyRequests)
		return
	}
	p.links[c.ID] = &previewLink{p: pv, ss: ss}
	p.mu.Unlock()
	p.watch(ss)
	p.log.Info("preview link", "session", ss.id, "id", c.ID, "port", c.Port, "expires", c.Expires)

	pv.Link = link
	pv.URL += "?" + protocol.PreviewQuery + "=" + link
	body, _ := json.Marshal(pv)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	w.Write(body)
}

// origin is the scheme and host of link id.
func (p *previews) origin(id string) string {
	return p.scheme + "://" + id + "." + p.domain + p.port
}

var previewIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newPreviewID is a random link id: 20 base32 letters and digits (100
// bits), a DNS label.
func newPreviewID() string {
	var b [20 * 5 / 8]byte
	rand.Read(b[:])
	return previewIDEncoding.EncodeToString(b[:])
}

// list is the session's live links, oldest expiry first.
func (p *previews) list(ss *session) []protocol.Preview {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prune(p.now())
	out := []protocol.Preview{}
	for _, l := range p.links {
		if l.ss == ss && !l.revoked {
			out = append(out, l.p)
		}
	}
	slices.SortFunc(out, func(a, b protocol.Preview) int {
		if c := a.Expires.Compare(b.Expires); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// revoke marks the session's link id revoked.
func (p *previews) revoke(ss *session, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.links[id]
	if l == nil || l.ss != ss || l.revoked {
		return false
	}
	l.revoked = true
	p.log.Info("preview link revoked", "session", ss.id, "id", id)
	return true
}

// prune drops expired links: their own expiry answers 410 for them.
func (p *previews) prune(now time.Time) {
	for id, l := range p.links {
		if !now.Before(l.p.Expires) {
			delete(p.links, id)
		}
	}
}

// watch sets up the session's connections, once, and their end with it.
func (p *previews) watch(ss *session) *previewConns {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.conns[ss]; pc != nil {
		return pc
	}
	pc := &previewConns{sem: make(chan struct{}, maxPreviewConns), open: map[*previewConn]struct{}{}}
	pc.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			_, ps, _ := net.SplitHostPort(addr)
			port, _ := strconv.Atoi(ps)
			return pc.dial(ctx, func(ctx context.Context) (net.Conn, error) { return p.dial(ctx, ss, port) })
		},
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        previewIdleTimeout,
		ResponseHeaderTimeout:  previewHeaderTimeout,
		MaxResponseHeaderBytes: 1 << 20,
		DisableCompression:     true,
	}
	p.conns[ss] = pc
	context.AfterFunc(ss.ctx, func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, ss)
		for id, l := range p.links {
			if l.ss == ss {
				delete(p.links, id)
			}
		}
		p.mu.Unlock()
	})
	return pc
}

// dial takes a slot and connects.
func (pc *previewConns) dial(ctx context.Context, connect func(context.Context) (net.Conn, error)) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, previewDialTimeout)
	defer cancel()
	select {
	case pc.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("the session has %d connections to its preview ports open, the most it may", maxPreviewConns)
	}
	c, err := connect(ctx)
	if err != nil {
		<-pc.sem
		return nil, err
	}
	conn := &previewConn{Conn: c, pc: pc}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.done {
		c.Close()
		<-pc.sem
		return nil, errSessionEnded
	}
	pc.open[conn] = struct{}{}
	return conn, nil
}

// close ends every connection: the session has ended.
func (pc *previewConns) close() {
	pc.mu.Lock()
	pc.done = true
	open := make([]*previewConn, 0, len(pc.open))
	for c := range pc.open {
		open = append(open, c)
	}
	pc.mu.Unlock()
	pc.tr.CloseIdleConnections()
	for _, c := range open {
		c.Close()
	}
}

// previewConn is a connection to a session's port, counted while open.
type previewConn struct {
	net.Conn
	pc   *previewConns
	once sync.Once
}

func (c *previewConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.pc.mu.Lock()
		delete(c.pc.open, c)
		c.pc.mu.Unlock()
		<-c.pc.sem
	})
	return err
}

// host reports whether r is for a host under the preview domain (every
// such request is the previews', never the box's routes) and the link id
// its first label names ("" for one that names none).
func (p *previews) host(r *http.Request) (id string, ok bool) {
	if p.domain == "" {
		return "", false
	}
	h := r.Host
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == p.domain {
		return "", true
	}
	label, ok := strings.CutSuffix(h, "."+p.domain)
	if !ok {
		return "", false
	}
	if !protocol.ValidPreviewID(label) {
		return "", true
	}
	return label, true
}

// serveHost answers every request to a host under the preview domain:
// it reports false for any other host.
func (p *previews) serveHost(w http.ResponseWriter, r *http.Request) bool {
	id, ok := p.host(r)
	if !ok {
		return false
	}
	if id == "" || !p.enabled() {
		http.Error(w, "no preview here", http.StatusNotFound)
		return true
	}
	c, from, ok := p.credential(r, id)
	if !ok {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "this preview needs its link: open the URL that POST /sessions/{id}/previews answered", http.StatusUnauthorized)
		return true
	}
	if owner := ownerOf(c.Session); p.machine != "" && owner != "" && owner != p.machine && r.Header.Get(FlyReplaySrcHeader) == "" {
		w.Header().Set(FlyReplayHeader, "instance="+owner)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusConflict)
		return true
	}
	now := p.now()
	p.mu.Lock()
	l := p.links[id]
	revoked := l != nil && l.revoked
	p.mu.Unlock()
	var gone string
	ss := p.live.lookup(c.Session)
	switch {
	case !now.Before(c.Expires):
		gone = "this preview link has expired"
	case revoked:
		gone = "this preview link was revoked"
	case ss == nil || ss.ctx.Err() != nil:
		gone = "this preview's session has ended"
	case l == nil || l.ss != ss:
		gone = "this box no longer knows this preview link"
	}
	if gone != "" {
		w.Header().Set("Cache-Control", "no-store")
		if from == fromCookie {
			http.SetCookie(w, &http.Cookie{Name: protocol.PreviewCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: p.scheme == "https", SameSite: http.SameSiteLaxMode})
		}
		http.Error(w, gone, http.StatusGone)
		return true
	}
	if from == fromQuery && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		// Trade the link for a cookie, and take it out of the address bar
		// (and of the app's Referer headers).
		http.SetCookie(w, &http.Cookie{
			Name: protocol.PreviewCookie, Value: r.URL.Query().Get(protocol.PreviewQuery), Path: "/",
			Expires: c.Expires, HttpOnly: true, Secure: p.scheme == "https", SameSite: http.SameSiteLaxMode,
		})
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, sameHostURI(r.URL), http.StatusSeeOther)
		return true
	}
	// A paused session (pause.go) is woken: its server is frozen, and a
	// pooled connection to it would wait for nothing. It is not paused
	// while the request (a WebSocket, a stream) lasts.
	defer ss.inUse()()
	if err := ss.wake(); err != nil {
		http.Error(w, "the session could not be woken: "+err.Error(), http.StatusBadGateway)
		return true
	}
	p.proxy(w, r, ss, c.Port)
	return true
}

// Where a request's link came from.
const (
	fromQuery = iota + 1
	fromHeader
	fromCookie
)

// credential finds a link for id in r: the query, the Authorization
// header or a cookie (any of them: a page under the preview domain may
// set a cookie of the same name for every host under it).
func (p *previews) credential(r *http.Request, id string) (protocol.PreviewClaims, int, bool) {
	try := func(link string) (protocol.PreviewClaims, bool) {
		c, err := protocol.VerifyPreviewLink(p.key, link)
		return c, err == nil && c.ID == id
	}
	if q := r.URL.Query().Get(protocol.PreviewQuery); q != "" {
		if c, ok := try(q); ok {
			return c, fromQuery, true
		}
	}
	if b, ok := route.Bearer(r); ok && strings.HasPrefix(b, protocol.PreviewLinkPrefix) {
		if c, ok := try(b); ok {
			return c, fromHeader, true
		}
	}
	n := 0
	for _, ck := range r.Cookies() {
		if ck.Name != protocol.PreviewCookie {
			continue
		}
		if n++; n > 8 {
			break
		}
		if c, ok := try(ck.Value); ok {
			return c, fromCookie, true
		}
	}
	return protocol.PreviewClaims{}, 0, false
}

// sameHostURI is u's path and query without the link, as a path on the
// same host: "//evil.example/x" becomes "/evil.example/x", never another
// host.
func sameHostURI(u *url.URL) string {
	uri := "/" + strings.TrimLeft(u.EscapedPath(), "/\\")
	if q := withoutQuery(u.RawQuery, protocol.PreviewQuery); q != "" {
		uri += "?" + q
	}
	return uri
}

// withoutQuery is raw without parameter name.
func withoutQuery(raw, name string) string {
	var keep []string
	for part := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(k); part == "" || err == nil && k == name {
			continue
		}
		keep = append(keep, part)
	}
	return strings.Join(keep, "&")
}

// proxy forwards r to the session's port, without the box's credentials.
func (p *previews) proxy(w http.ResponseWriter, r *http.Request, ss *session, port int) {
	pc := p.watch(ss)
	rp := &httputil.ReverseProxy{
		Transport:     pc.tr,
		FlushInterval: 100 * time.Millisecond,
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			host := "localhost:" + strconv.Itoa(port)
			out.URL.Scheme, out.URL.Host, out.Host = "http", host, host
			out.URL.RawQuery = withoutQuery(out.URL.RawQuery, protocol.PreviewQuery)
			if b, ok := route.Bearer(out); ok && (strings.HasPrefix(b, protocol.PreviewLinkPrefix) || strings.HasPrefix(b, protocol.TokenPrefix) || b == p.key) {
				out.Header.Del("Authorization")
			}
			stripCookie(out.Header, protocol.PreviewCookie)
			pr.SetXForwarded()
			if p.scheme == "https" {
				out.Header.Set("X-Forwarded-Proto", "https")
			}
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.log.Debug("preview", "session", ss.id, "port", port, "err", err)
			if errors.Is(err, context.Canceled) {
				return
			}
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, fmt.Sprintf("port %d of the session does not answer: %v", port, err), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// stripCookie removes every cookie called name from h's Cookie headers.
func stripCookie(h http.Header, name string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		for part := range strings.SplitSeq(line, ";") {
			k, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if k == name || strings.TrimSpace(part) == "" {
				continue
			}
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// helperDial connects through the session's helper, inside its network
// namespace.
func helperDial(ctx context.Context, ss *session, port int) (net.Conn, error) {
	info, err := ss.sandboxed()
	if err != nil {
		return nil, err
	}
	return dialSessionHelper(ctx, info.Sandbox, port)
}
