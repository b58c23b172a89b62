package client

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Endpoint is where a box listens and the key it accepts. URL is the
// box's WebSocket URL (ws:// or wss://; http:// and https:// are accepted
// and mean the same). HTTP routes (/environment, /health, /files) are
// resolved against it, so a path prefix is kept: with
// wss://h/boxes/media/ the environment is https://h/boxes/media/environment.
type Endpoint struct {
	URL string
	Key string
}

// Option configures a Client.
type Option func(*options)

type options struct {
	httpClient     *http.Client
	logger         *slog.Logger
	dialTimeout    time.Duration
	requestTimeout time.Duration
	keepalive      time.Duration
	attempts       int
	backoff        time.Duration
	maxBackoff     time.Duration
	eventBuffer    int
	maxMessage     int64
	onDraining     func(box string, deadline time.Time)
	egress         *protocol.NetworkSpec // WithEgress
}

func defaultOptions() options {
	return options{
		httpClient:     http.DefaultClient,
		logger:         slog.New(slog.DiscardHandler),
		dialTimeout:    15 * time.Second,
		requestTimeout: 30 * time.Second,
		keepalive:      25 * time.Second,
		attempts:       5,
		backoff:        250 * time.Millisecond,
		maxBackoff:     8 * time.Second,
		eventBuffer:    64 << 20,
		maxMessage:     100 << 20,
	}
}

// WithHTTPClient sets the client used for /environment, /health and file
// reads. The default is http.DefaultClient.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithLogger sets where the client logs connection changes. The default
// discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDialTimeout bounds opening a socket, WebSocket handshake included
// (default 15s).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithRequestTimeout bounds Environment and Health requests whose context
// has no earlier deadline (default 30s).
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// WithKeepalive sets how often an idle socket is pinged (default 25s). A
// socket that hears nothing, not even a pong, for twice that long is taken
// as dropped. Zero turns keepalive off.
func WithKeepalive(d time.Duration) Option { return func(o *options) { o.keepalive = d } }

// WithReconnect sets how many times a dropped socket with prompts in
// flight is redialled (default 5) and the first delay between attempts
// (default 250ms); the delay doubles up to 8s, with jitter.
func WithReconnect(attempts int, backoff time.Duration) Option {
	return func(o *options) { o.attempts, o.backoff = attempts, backoff }
}

// WithEventBuffer caps how many bytes of events and display updates a
// Result keeps that its reader has not consumed yet (default 64MB). The
// connection never waits for a slow reader: a prompt that outgrows the cap
// is aborted and fails with ErrBufferFull. Prompts whose events nobody
// reads should set PromptOptions.DiscardEvents.
func WithEventBuffer(bytes int) Option { return func(o *options) { o.eventBuffer = bytes } }

// WithMaxMessage caps one WebSocket message in either direction (default
// 100MB, v1's limit). A prompt whose inline files make it larger fails
// before it is sent.
func WithMaxMessage(bytes int64) Option { return func(o *options) { o.maxMessage = bytes } }

// WithOnDraining sets a function called when a box says it is shutting
// down (a deploy sent it SIGTERM; capability "drain"): it takes no new
// sessions or prompts (a prompt sent now fails with an *Error of code
// protocol.CodeDraining), and the prompts in flight go on until deadline
// and complete as usual. The host app should send new prompts elsewhere,
// for instance to a Box of another endpoint, or to this one again once a
// new instance answers /health. f runs on a goroutine of its own and must
// return; Box.Draining reports the same. Once the prompts in flight on the
// draining box have ended, the next prompt leaves its socket and opens a
// new session at the endpoint's URL, which a load balancer sends to
// another instance (a new session: nothing is resumed).
func WithOnDraining(f func(box string, deadline time.Time)) Option {
	return func(o *options) { o.onDraining = f }
}

// Client holds named endpoints and one Box per name. It is safe for
// concurrent use.
type Client struct {
	opts options

	mu        sync.Mutex
	endpoints map[string]Endpoint
	boxes     map[string]*Box
	closed    bool
}

// New returns a Client for the named endpoints. Nothing is dialled until a
// box is used. An endpoint with a bad URL or no key is an error.
func New(endpoints map[string]Endpoint, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.httpClient == nil {
		o.httpClient = http.DefaultClient
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.attempts < 0 {
		o.attempts = 0
	}
	if o.backoff <= 0 {
		o.backoff = 250 * time.Millisecond
	}
	eps := make(map[string]Endpoint, len(endpoints))
	var errs []error
	for _, name := range sortedNames(endpoints) {
		ep := endpoints[name]
		if _, _, err := parseEndpoint(ep.URL); err != nil {
			errs = append(errs, fmt.Errorf("endpoint %q: %w", name, err))
			continue
		}
		if strings.TrimSpace(ep.Key) == "" {
			errs = append(errs, fmt.Errorf("endpoint %q: missing key (the box's GLOVEBOX_KEY)", name))
			continue
		}
		eps[name] = ep
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Client{opts: o, endpoints: eps, boxes: map[string]*Box{}}, nil
}

// Box returns the box for an endpoint name. Boxes are created on first
// use and cached; a box that was closed is replaced by a fresh one.
func (c *Client) Box(name string) (*Box, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if b, ok := c.boxes[name]; ok && !b.isClosed() {
		return b, nil
	}
	ep, ok := c.endpoints[name]
	if !ok {
		return nil, fmt.Errorf("client: unknown box %q (known: %s)", name, strings.Join(sortedNames(c.endpoints), ", "))
	}
	b, err := newBox(name, ep, c.opts)
	if err != nil {
		return nil, err
	}
	c.boxes[name] = b
	return b, nil
}

// Close closes every box. Prompts in flight fail with ErrClosed. Close
// returns once every goroutine the client started has stopped.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	boxes := c.boxes
	c.boxes = map[string]*Box{}
	c.mu.Unlock()
	for _, b := range boxes {
		b.Close()
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// parseEndpoint returns the WebSocket URL and the HTTP base URL of an
// endpoint URL.
func parseEndpoint(raw string) (ws, base *url.URL, err error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("bad url %q: %w", raw, err)
	}
	ws, base = new(url.URL), new(url.URL)
	*ws, *base = *u, *u
	switch u.Scheme {
	case "ws", "http":
		ws.Scheme, base.Scheme = "ws", "http"
	case "wss", "https":
		ws.Scheme, base.Scheme = "wss", "https"
	default:
		return nil, nil, fmt.Errorf("url %q: scheme must be ws, wss, http or https", raw)
	}
	if u.Host == "" {
		return nil, nil, fmt.Errorf("url %q: missing host", raw)
	}
	base.RawQuery, base.Fragment, base.User = "", "", nil
	ws.Fragment = ""
	return ws, base, nil
}
