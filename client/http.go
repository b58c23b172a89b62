package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/glovebox-dev/glovebox/protocol"
)

// envCache holds a box's environment once fetched, and the fetch under way.
type envCache struct {
	mu   sync.Mutex
	env  *protocol.Environment
	call chan struct{} // non-nil while a fetch is under way; closed when it ends
	err  error         // the error of the fetch that just ended
}

// Environment returns the box's environment (GET /environment): its name,
// version, base, directories, packages, limits and capabilities. The first
// success is cached; concurrent first calls share one request; a failure is
// not cached.
func (b *Box) Environment(ctx context.Context) (*protocol.Environment, error) {
	e := &b.env
	for {
		e.mu.Lock()
		if e.env != nil {
			env := e.env
			e.mu.Unlock()
			return env, nil
		}
		if call := e.call; call != nil {
			e.mu.Unlock()
			select {
			case <-call:
				e.mu.Lock()
				env, err := e.env, e.err
				e.mu.Unlock()
				if env != nil {
					return env, nil
				}
				if err != nil && !isContextErr(err) {
					return nil, err
				}
				continue // the caller that fetched gave up; try again
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		call := make(chan struct{})
		e.call = call
		e.mu.Unlock()

		var env protocol.Environment
		err := b.getJSON(ctx, "environment", true, &env)
		e.mu.Lock()
		e.call = nil
		e.err = err
		if err == nil {
			e.env = &env
		}
		close(call)
		e.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return &env, nil
	}
}

// Health returns the box's GET /health. It needs no key.
func (b *Box) Health(ctx context.Context) (*protocol.Health, error) {
	var h protocol.Health
	if err := b.getJSON(ctx, "health", false, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// route resolves a route name against the box's base URL, keeping its
// path prefix.
func (b *Box) route(name string) *url.URL {
	return b.base.ResolveReference(&url.URL{Path: name})
}

func (b *Box) getJSON(ctx context.Context, route string, auth bool, v any) error {
	body, err := b.getBody(ctx, b.route(route), route, auth, 16<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("box %q: %s is not the JSON expected: %w", b.name, route, err)
	}
	return nil
}

// getBody GETs u (what names it in errors), with the box's key when auth
// is set, and returns its body of at most limit bytes; any answer but 200
// is an error carrying the box's status and reason.
func (b *Box) getBody(ctx context.Context, u *url.URL, what string, auth bool, limit int64) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok && b.opts.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.requestTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("box %q: get %s: %w", b.name, what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(fmt.Sprintf("box %q: get %s", b.name, u.Redacted()), resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("box %q: read %s: %w", b.name, what, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("box %q: %s is larger than %d bytes", b.name, what, limit)
	}
	return body, nil
}

func statusError(what string, resp *http.Response) error {
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	msg := strings.TrimSpace(string(snippet))
	var err error
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		err = fmt.Errorf("%s: %w (HTTP 401): check the key", what, ErrUnauthorized)
	case http.StatusGone:
		err = fmt.Errorf("%s: HTTP 410 Gone: the file expired on the box", what)
	default:
		err = fmt.Errorf("%s: HTTP %s", what, resp.Status)
	}
	if msg != "" && resp.StatusCode != http.StatusUnauthorized {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// ReadOption changes how Result.Read fetches a file.
type ReadOption func(*readOptions)

type readOptions struct{ consume bool }

// Consume asks the box to delete a server-stored output once it has been
// read (GET /files/{id}?consume=1). A second read then fails.
func Consume() ReadOption { return func(o *readOptions) { o.consume = true } }

// Read waits for the prompt to complete and opens the output called name.
// Inline outputs are decoded in place; server outputs are fetched with the
// box's key from /files/{id} on the box's own URL, whatever host the ref's
// URL names (the box may not know the name clients reach it by: its
// GLOVEBOX_PUBLIC_URL defaults to http://localhost:PORT). A server ref
// without an id is fetched from its URL only when that is on the box's
// origin (otherwise Read fails with ErrForeignOrigin, and the key is sent
// nowhere else). url outputs are fetched without the key, with the
// ref's headers. s3 and gcs refs cannot be read by this client: use their
// cloud SDKs with the ref's bucket and key. The caller closes the reader.
func (r *Result) Read(ctx context.Context, name string, opts ...ReadOption) (io.ReadCloser, error) {
	c, err := r.Wait(ctx)
	if err != nil {
		return nil, err
	}
	ref, ok := c.Outputs[name]
	if !ok {
		return nil, fmt.Errorf("read %q: %w (the prompt returned %s)", name, ErrNoOutput, outputNames(c.Outputs))
	}
	return r.box.Open(ctx, ref, opts...)
}

// Open reads a FileRef the box returned. See Result.Read.
func (b *Box) Open(ctx context.Context, ref protocol.FileRef, opts ...ReadOption) (rc io.ReadCloser, err error) {
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	switch ref.Kind {
	case protocol.KindInline:
		data, err := ref.Bytes()
		if err != nil {
			return nil, fmt.Errorf("read %q: %w", ref.Name, err)
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	case protocol.KindServer:
		var u *url.URL
		if fileIDRE.MatchString(ref.ID) {
			u = b.route("files/" + ref.ID) // the box's own origin
		} else if u, err = b.base.Parse(ref.URL); err != nil {
			return nil, fmt.Errorf("read %q: bad url %q: %w", ref.Name, ref.URL, err)
		}
		if !sameOrigin(u, b.base) {
			return nil, fmt.Errorf("read %q: %w: it is at %s, the box at %s; not sending the key there (check the box's GLOVEBOX_PUBLIC_URL)", ref.Name, ErrForeignOrigin, origin(u), origin(b.base))
		}
		if o.consume {
			q := u.Query()
			q.Set("consume", "1")
			u.RawQuery = q.Encode()
		}
		return b.fetch(ctx, ref.Name, u, map[string]string{"Authorization": "Bearer " + b.ep.Key})
	case protocol.KindURL:
		u, err := url.Parse(ref.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("read %q: url %q is not an http(s) URL", ref.Name, ref.URL)
		}
		return b.fetch(ctx, ref.Name, u, ref.Headers)
	default:
		return nil, fmt.Errorf("read %q: a %s ref is read with its cloud SDK (bucket %q), not with this client", ref.Name, ref.Kind, ref.Bucket)
	}
}

func (b *Box) fetch(ctx context.Context, name string, u *url.URL, headers map[string]string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", name, err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", name, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, statusError(fmt.Sprintf("read %q from %s", name, u.Redacted()), resp)
	}
	return resp.Body, nil
}

func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

func sameOrigin(a, b *url.URL) bool { return origin(a) == origin(b) }

func outputNames(outs map[string]protocol.FileRef) string {
	if len(outs) == 0 {
		return "no outputs"
	}
	return strings.Join(sortedNames(outs), ", ")
}

var fileIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// File opens the file the box stores under id (GET /files/{id}), the
// route server refs point at, resolved against the box's own URL.
func (b *Box) File(ctx context.Context, id string, opts ...ReadOption) (io.ReadCloser, error) {
	if !fileIDRE.MatchString(id) {
		return nil, fmt.Errorf("file id %q: want letters, digits, _ and - only", id)
	}
	u := b.route("files/" + id)
	return b.Open(ctx, protocol.FileRef{Kind: protocol.KindServer, Name: id, ID: id, URL: u.String()}, opts...)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
