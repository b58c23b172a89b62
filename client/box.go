package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Box is one endpoint: a lazily opened, self-healing connection to a box
// and the prompts in flight on it. Its methods are safe for concurrent use.
type Box struct {
	name  string
	ep    Endpoint
	ws    *url.URL // WebSocket URL
	base  *url.URL // HTTP base URL, for /environment, /health, /files
	opts  options
	log   *slog.Logger
	ctx   context.Context // cancelled by Close
	close context.CancelFunc
	wg    sync.WaitGroup // reader, writer and reconnect goroutines

	mu         sync.Mutex
	conn       *conn
	connecting chan struct{} // non-nil while a dial is under way; closed when it ends
	closed     bool
	inflight   map[string]*Result
	nextID     uint64
	session    string          // session id from the box's hello
	attach     bool            // session was given to Attach: the first dial resumes it
	caps       map[string]bool // capabilities from the box's hello; nil from a v1 box
	lastSeq    uint64          // highest seq seen in this session
	drainUntil time.Time       // when the box that said it drains cuts; zero if none did

	env envCache

	// The session's own egress rules (egress.go): the rules its hello
	// carries, the effective policy last reported, whether the answer to
	// the hello's rules is still to come, and SetEgress's waiter.
	egress      *protocol.NetworkSpec
	egressView  *protocol.EgressEnvironment
	egressHello bool
	egressWait  chan *protocol.EgressPolicy
	egressMu    sync.Mutex // one SetEgress at a time
}

func newBox(name string, ep Endpoint, o options) (*Box, error) {
	ws, base, err := parseEndpoint(ep.URL)
	if err != nil {
		return nil, fmt.Errorf("box %q: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Box{name: name, ep: ep, ws: ws, base: base, opts: o, log: o.logger.With("box", name),
		ctx: ctx, close: cancel, inflight: map[string]*Result{}, egress: o.egress}, nil
}

// Name is the box's endpoint name.
func (b *Box) Name() string { return b.name }

// Draining reports whether the box this Box's session is on said it is
// shutting down, and when it cuts what still runs (see WithOnDraining). A
// new session (the next connection) clears it.
func (b *Box) Draining() (deadline time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.drainUntil, !b.drainUntil.IsZero()
}

// File is an input file given by its bytes or a reader. Mime defaults to a
// guess from the file name.
type File struct {
	Mime   string
	Data   []byte
	Reader io.Reader // read to the end when the prompt is sent; used when Data is nil
}

// PromptOptions are a prompt's optional parts.
type PromptOptions struct {
	// Files are sent inline, by name. A name in both Files and Inputs
	// takes the Files entry.
	Files map[string]File
	// Inputs are ready-made FileRefs (url, server, s3, ...), by name.
	Inputs map[string]protocol.FileRef
	// OutputsPolicy changes how this prompt's outputs are stored.
	OutputsPolicy *protocol.OutputsOverride
	// DiscardEvents drops the prompt's events instead of buffering them
	// for Result.Events: for callers that only Wait.
	DiscardEvents bool
}

// Prompt sends a prompt and returns at once with its Result. ctx covers the
// whole prompt, not just sending it: when ctx ends before the prompt does,
// the prompt is aborted on the box and Wait returns ctx's error.
func (b *Box) Prompt(ctx context.Context, text string, opts PromptOptions) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	inputs, err := buildInputs(opts, b.opts.maxMessage)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	if err := opts.OutputsPolicy.Check(); err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	b.mu.Lock()
	b.nextID++
	id := "req_" + strconv.FormatUint(b.nextID, 10)
	b.mu.Unlock()
	frame, err := protocol.Encode(&protocol.Prompt{ID: id, Text: text, Inputs: inputs, OutputsPolicy: opts.OutputsPolicy})
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	if int64(len(frame)) > b.opts.maxMessage {
		return nil, fmt.Errorf("prompt: message is %d bytes, over the %d-byte limit: send large files as url refs in Inputs", len(frame), b.opts.maxMessage)
	}
	r := newResult(b, id, opts.DiscardEvents)
	r.frame = frame
	for {
		c, err := b.getConn(ctx)
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		if b.conn != c {
			b.mu.Unlock()
			continue
		}
		b.inflight[id] = r
		b.mu.Unlock()
		select {
		case c.out <- frame:
		case <-c.quit:
			// The socket dropped before the frame was queued, so the
			// box never saw this prompt: try again on a new socket,
			// unless the drop already failed the prompt.
			b.mu.Lock()
			owned := b.inflight[id] == r
			delete(b.inflight, id)
			b.mu.Unlock()
			if !owned && r.isDone() {
				_, err := r.Wait(ctx)
				return nil, err
			}
			continue
		case <-ctx.Done():
			b.forget(id)
			return nil, ctx.Err()
		}
		break
	}
	stop := context.AfterFunc(ctx, func() { b.cancelPrompt(r, context.Cause(ctx)) })
	r.mu.Lock()
	r.stop = stop
	r.mu.Unlock()
	if r.isDone() {
		stop()
	}
	return r, nil
}

func buildInputs(opts PromptOptions, max int64) (map[string]protocol.FileRef, error) {
	inputs := make(map[string]protocol.FileRef, len(opts.Inputs)+len(opts.Files))
	// The box's own rule for input names, checked before anything is sent.
	for name, ref := range opts.Inputs {
		if err := protocol.CheckInputName(name); err != nil {
			return nil, err
		}
		if err := ref.Validate(); err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		inputs[name] = ref
	}
	for name, f := range opts.Files {
		if err := protocol.CheckInputName(name); err != nil {
			return nil, err
		}
		data := f.Data
		if data == nil && f.Reader != nil {
			var err error
			data, err = io.ReadAll(io.LimitReader(f.Reader, max+1))
			if err != nil {
				return nil, fmt.Errorf("read file %q: %w", name, err)
			}
			if int64(len(data)) > max {
				return nil, fmt.Errorf("file %q is over the %d-byte message limit: send it as a url ref in Inputs", name, max)
			}
		}
		mime := f.Mime
		if mime == "" {
			mime = protocol.GuessMime(name)
		}
		inputs[name] = protocol.InlineRef(name, mime, data)
	}
	return inputs, nil
}

// cancelPrompt ends a prompt whose context ended, and aborts it on the box.
func (b *Box) cancelPrompt(r *Result, cause error) {
	if r.isDone() {
		return
	}
	b.forget(r.id)
	r.finish(nil, cause)
	b.mu.Lock()
	c := b.conn
	b.mu.Unlock()
	if c != nil {
		c.trySend(&protocol.Abort{ID: r.id})
	}
}

func (b *Box) forget(id string) {
	b.mu.Lock()
	delete(b.inflight, id)
	b.mu.Unlock()
}

// send sends one frame, connecting first if needed.
func (b *Box) send(ctx context.Context, m protocol.ClientMessage) error {
	frame, err := protocol.Encode(m)
	if err != nil {
		return err
	}
	for {
		c, err := b.getConn(ctx)
		if err != nil {
			return err
		}
		select {
		case c.out <- frame:
			return nil
		case <-c.quit:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close closes the box: prompts in flight fail with ErrClosed, the socket
// is closed with a close frame, and Close returns once every goroutine of
// the box has stopped. A Client replaces a closed box on the next
// Client.Box call.
func (b *Box) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wg.Wait()
		return nil
	}
	b.closed = true
	c := b.conn
	b.conn = nil
	victims := b.takeInflight()
	b.mu.Unlock()
	b.close()
	if c != nil {
		c.shutdown(wsconn.CloseNormal, "client closed")
	}
	for _, r := range victims {
		r.finish(nil, fmt.Errorf("box %q: %w", b.name, ErrClosed))
	}
	b.wg.Wait()
	return nil
}

func (b *Box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// takeInflight empties the in-flight table. b.mu is held.
func (b *Box) takeInflight() []*Result {
	rs := make([]*Result, 0, len(b.inflight))
	for id, r := range b.inflight {
		rs = append(rs, r)
		delete(b.inflight, id)
	}
	return rs
}
