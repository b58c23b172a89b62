package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
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
	caps       map[string]bool // capabilities from the box's hello; nil from a v1 box
	lastSeq    uint64          // highest seq seen in this session
	drainUntil time.Time       // when the box that said it drains cuts; zero if none did

	env envCache
}

func newBox(name string, ep Endpoint, o options) (*Box, error) {
	ws, base, err := parseEndpoint(ep.URL)
	if err != nil {
		return nil, fmt.Errorf("box %q: %w", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Box{name: name, ep: ep, ws: ws, base: base, opts: o, log: o.logger.With("box", name),
		ctx: ctx, close: cancel, inflight: map[string]*Result{}}, nil
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

// getConn returns the live connection, dialling one if there is none.
func (b *Box) getConn(ctx context.Context) (*conn, error) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, fmt.Errorf("box %q: %w", b.name, ErrClosed)
		}
		if b.conn != nil && !b.drainUntil.IsZero() && len(b.inflight) == 0 {
			// The box said it is shutting down and nothing is left on
			// its socket: leave it, and dial afresh (a load balancer sends
			// the new session to another instance).
			old := b.conn
			b.conn, b.session, b.lastSeq, b.drainUntil = nil, "", 0, time.Time{}
			b.mu.Unlock()
			b.log.Info("leaving a draining box's socket for a new session")
			old.shutdown(wsconn.CloseNormal, "the box is draining")
			continue
		}
		if b.conn != nil {
			c := b.conn
			b.mu.Unlock()
			return c, nil
		}
		if wait := b.connecting; wait != nil {
			b.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wait := make(chan struct{})
		b.connecting = wait
		resume := b.resumable()
		b.mu.Unlock()

		c, err := b.dial(ctx, resume)
		b.mu.Lock()
		b.connecting = nil
		close(wait)
		if err == nil {
			if b.closed {
				b.mu.Unlock()
				c.shutdown(wsconn.CloseNormal, "client closed")
				return nil, fmt.Errorf("box %q: %w", b.name, ErrClosed)
			}
			b.install(c)
		}
		b.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// resumable reports whether the next dial should ask to resume. b.mu is
// held.
func (b *Box) resumable() bool { return b.caps[protocol.CapResume] && b.session != "" }

// dial opens a socket and sends the client hello. With resume, it asks the
// box to resume the session and reads the box's hello before returning.
func (b *Box) dial(ctx context.Context, resume bool) (*conn, error) {
	u := *b.ws
	var session string
	var last uint64
	if resume {
		b.mu.Lock()
		session, last = b.session, b.lastSeq
		b.mu.Unlock()
		q := u.Query()
		q.Set("resume", session)
		q.Set("last_seq", strconv.FormatUint(last, 10))
		u.RawQuery = q.Encode()
	}
	dctx, cancel := context.WithTimeout(ctx, b.opts.dialTimeout)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)() // Close ends a dial under way
	h := http.Header{}
	h.Set("Authorization", "Bearer "+b.ep.Key)
	ws, resp, err := wsconn.Dial(dctx, u.String(), wsconn.DialOptions{Header: h, HandshakeTimeout: b.opts.dialTimeout})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("connect to box %q at %s: %w: the box refused the key (check GLOVEBOX_KEY)", b.name, b.ws.Redacted(), ErrUnauthorized)
		}
		if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
			return nil, fmt.Errorf("connect to box %q at %s: HTTP %s: the box is shutting down or full; retry after %s, or use another endpoint", b.name, b.ws.Redacted(), resp.Status, cmp.Or(resp.Header.Get("Retry-After"), "1")+"s")
		}
		if resp != nil {
			return nil, fmt.Errorf("connect to box %q at %s: HTTP %s", b.name, b.ws.Redacted(), resp.Status)
		}
		return nil, fmt.Errorf("connect to box %q at %s: %w", b.name, b.ws.Redacted(), err)
	}
	ws.SetReadLimit(b.opts.maxMessage)
	c := &conn{ws: ws, out: make(chan []byte, 64), quit: make(chan struct{})}
	hello, _ := protocol.Encode(&protocol.ClientHello{Capabilities: []string{protocol.CapResume}})
	ws.SetWriteDeadline(time.Now().Add(b.opts.dialTimeout))
	if err := ws.WriteText(hello); err != nil {
		ws.Close()
		return nil, fmt.Errorf("connect to box %q: send hello: %w", b.name, err)
	}
	ws.SetWriteDeadline(time.Time{})
	if !resume {
		return c, nil
	}
	// A box that announced resume sends its hello first; wait for it so
	// the replay that follows is read against the right session.
	ws.SetReadDeadline(time.Now().Add(b.opts.dialTimeout))
	data, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("connect to box %q: read hello: %w", b.name, err)
	}
	ws.SetReadDeadline(time.Time{})
	m, err := protocol.DecodeServer(data)
	h2, ok := m.(*protocol.ServerHello)
	if err != nil || !ok {
		ws.Close()
		return nil, fmt.Errorf("connect to box %q: the box answered a resume without a hello", b.name)
	}
	c.resumed = h2.Resumed && h2.SessionID == session
	c.replayUntil = h2.LastSeq
	b.mu.Lock()
	b.applyHello(h2)
	b.mu.Unlock()
	return c, nil
}

// applyHello records the box's hello. b.mu is held.
func (b *Box) applyHello(h *protocol.ServerHello) {
	if !h.Resumed || h.SessionID != b.session {
		b.lastSeq = 0
		b.drainUntil = time.Time{} // a new session: perhaps another instance
	}
	b.session = h.SessionID
	b.caps = make(map[string]bool, len(h.Capabilities))
	for _, c := range h.Capabilities {
		b.caps[c] = true
	}
}

// install makes c the live connection and starts its goroutines. b.mu is
// held.
func (b *Box) install(c *conn) {
	b.conn = c
	b.wg.Add(2)
	go b.read(c)
	go b.write(c)
	if c.resumed {
		for _, r := range b.inflight {
			if !r.seen && r.frame != nil {
				c.unacked = append(c.unacked, r)
			}
		}
	}
	b.resend(c)
}

// resend sends again, once the replay of a resumed session is in, the
// prompts in flight the box has sent nothing about: their frame may have
// been written to the socket that dropped and never reached the box. A
// prompt the box does have is refused as a duplicate, which the prompt
// ignores. (A prompt that the box finishes between the replay and the
// resend would run twice; the window is the time the box takes to read
// the resend.) b.mu is held.
func (b *Box) resend(c *conn) {
	if !c.resumed || c.resendDone || b.lastSeq < c.replayUntil || b.conn != c {
		return
	}
	c.resendDone = true
	var frames [][]byte
	for _, r := range c.unacked {
		if b.inflight[r.id] == r && !r.seen && r.frame != nil {
			r.resent = true
			frames = append(frames, r.frame)
		}
	}
	c.unacked = nil
	if len(frames) == 0 {
		return
	}
	b.log.Info("sending again prompts the box has not acknowledged", "count", len(frames))
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for _, f := range frames {
			select {
			case c.out <- f:
			case <-c.quit:
				return
			}
		}
	}()
}

// conn is one socket: a reader goroutine, a writer goroutine, and the
// bounded queue of frames to write.
type conn struct {
	ws      *wsconn.Conn
	out     chan []byte
	quit    chan struct{} // closed by shutdown
	once    sync.Once
	resumed bool // the box resumed the session on this socket
	// replayUntil is the box's last seq when it resumed: frames up to it
	// are the replay. Once they are in, prompts the box never
	// acknowledged are sent again (see resend).
	replayUntil uint64
	resendDone  bool
	unacked     []*Result // prompts in flight, not acknowledged, when c was installed
}

// shutdown sends a close frame and closes the socket, once. A box takes a
// close frame as the end of the session, so it is sent only when the
// client means to end it.
func (c *conn) shutdown(code int, reason string) {
	c.once.Do(func() {
		close(c.quit)
		c.ws.WriteClose(code, reason, time.Now().Add(time.Second))
		c.ws.Close()
	})
}

// kill closes a broken socket without a close frame, so that the box keeps
// the session for a resume.
func (c *conn) kill() {
	c.once.Do(func() {
		close(c.quit)
		c.ws.Close()
	})
}

// trySend queues a frame without waiting; it reports whether it did.
func (c *conn) trySend(m protocol.ClientMessage) bool {
	frame, err := protocol.Encode(m)
	if err != nil {
		return false
	}
	select {
	case c.out <- frame:
		return true
	default:
		return false
	}
}

func (b *Box) write(c *conn) {
	defer b.wg.Done()
	var tick <-chan time.Time
	if b.opts.keepalive > 0 {
		t := time.NewTicker(b.opts.keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case frame := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(b.opts.dialTimeout + time.Duration(len(frame)>>16)*time.Second))
			if err := c.ws.WriteText(frame); err != nil {
				c.kill()
				return
			}
		case <-tick:
			if err := c.ws.Ping(time.Now().Add(b.opts.dialTimeout)); err != nil {
				c.kill()
				return
			}
		case <-c.quit:
			return
		}
	}
}

func (b *Box) read(c *conn) {
	defer b.wg.Done()
	idle := 2 * b.opts.keepalive
	extend := func() {
		if idle > 0 {
			c.ws.SetReadDeadline(time.Now().Add(idle))
		}
	}
	c.ws.SetPongHandler(extend)
	for {
		extend()
		data, err := c.ws.ReadMessage()
		if err != nil {
			c.kill()
			b.dropped(c, err)
			return
		}
		b.handle(c, data)
	}
}

// dropped handles the loss of socket c: prompts in flight are resumed on a
// new socket when the box supports it, and failed otherwise.
func (b *Box) dropped(c *conn, cause error) {
	b.mu.Lock()
	if b.conn != c || b.closed {
		b.mu.Unlock()
		return
	}
	b.conn = nil
	if len(b.inflight) == 0 {
		b.mu.Unlock()
		return // the next use dials again (resuming if it can)
	}
	if b.resumable() && b.opts.attempts > 0 {
		wait := make(chan struct{})
		b.connecting = wait
		b.wg.Add(1)
		b.mu.Unlock()
		b.log.Info("socket dropped; resuming", "err", cause)
		go b.reconnect(wait, cause)
		return
	}
	victims := b.takeInflight()
	b.mu.Unlock()
	err := fmt.Errorf("box %q: %w: %v (the box does not support resume)", b.name, ErrConnectionLost, cause)
	for _, r := range victims {
		r.finish(nil, err)
	}
}

// reconnect redials a dropped socket with backoff and jitter and resumes
// its session. wait is closed when it is done.
func (b *Box) reconnect(wait chan struct{}, cause error) {
	defer b.wg.Done()
	lastErr := cause
	delay := b.opts.backoff
	var c *conn
attempts:
	for attempt := 0; attempt < b.opts.attempts; attempt++ {
		t := time.NewTimer(jitter(delay, rand.N[time.Duration]))
		select {
		case <-t.C:
		case <-b.ctx.Done():
			t.Stop()
			lastErr = ErrClosed
			break attempts
		}
		var err error
		c, err = b.dial(b.ctx, true)
		if err == nil {
			break
		}
		lastErr = err
		b.log.Info("reconnect failed", "attempt", attempt+1, "err", err)
		if errors.Is(err, ErrUnauthorized) {
			break
		}
		delay = nextDelay(delay, b.opts.maxBackoff)
	}
	b.mu.Lock()
	b.connecting = nil
	close(wait)
	if c != nil && b.closed {
		b.mu.Unlock()
		c.shutdown(wsconn.CloseNormal, "client closed")
		return
	}
	if c != nil {
		b.install(c)
		if c.resumed {
			b.mu.Unlock()
			b.log.Info("session resumed")
			return
		}
		lastErr = errors.New("the box did not resume the session (it expired or the box restarted)")
	}
	victims := b.takeInflight()
	b.mu.Unlock()
	err := fmt.Errorf("box %q: %w: %v", b.name, ErrConnectionLost, lastErr)
	for _, r := range victims {
		r.finish(nil, err)
	}
}

// handle routes one frame from the box, read from c.
func (b *Box) handle(c *conn, data []byte) {
	m, err := protocol.DecodeServer(data)
	if err != nil {
		if !errors.Is(err, protocol.ErrUnknownType) {
			b.failMalformed(data, err)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c != nil {
		defer b.resend(c)
	}
	if seq := seqOf(m); seq > 0 {
		if seq <= b.lastSeq {
			return // already seen: a replay after resume
		}
		b.lastSeq = seq
	}
	switch m := m.(type) {
	case *protocol.ServerHello:
		b.applyHello(m)
	case *protocol.Draining:
		b.drainUntil = time.UnixMilli(m.Deadline)
		b.log.Info("box is shutting down", "deadline", b.drainUntil, "message", m.Message)
		if f := b.opts.onDraining; f != nil {
			deadline := b.drainUntil
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				f(b.name, deadline)
			}()
		}
	case *protocol.Event:
		if r := b.inflight[m.ID]; r != nil {
			r.ack()
			if !r.addEvent(Event{Type: m.EventType, Data: m.Data, Seq: m.Seq}) {
				b.overflow(r)
			}
		}
	case *protocol.DisplayPush:
		b.fanOut(m.PromptID, DisplayEvent{Kind: DisplayPush, Slot: m.Slot, SlotID: m.Slot.ID})
	case *protocol.DisplayClear:
		b.fanOut(m.PromptID, DisplayEvent{Kind: DisplayClear, SlotID: m.SlotID})
	case *protocol.Complete:
		if r := b.inflight[m.ID]; r != nil {
			r.ack()
			delete(b.inflight, m.ID)
			r.finish(&Completion{Message: m.Message, Outputs: m.Outputs}, nil)
		}
	case *protocol.Error:
		if m.ID == "" {
			b.log.Info("box reported an error", "code", m.Error.Code, "message", m.Error.Message)
			return
		}
		if r := b.inflight[m.ID]; r != nil {
			if r.resent && m.Error.Code == protocol.CodeDuplicateID {
				return // the box had the prompt after all
			}
			r.ack()
			delete(b.inflight, m.ID)
			r.finish(nil, &Error{Code: m.Error.Code, Message: m.Error.Message})
		}
	}
}

// failMalformed handles a frame that cannot be decoded. A frame naming a
// prompt in flight fails that prompt, which would otherwise never end;
// any other is logged and dropped.
func (b *Box) failMalformed(data []byte, err error) {
	id := protocol.PeekID(data)
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.inflight[id]
	if id == "" || r == nil {
		b.log.Info("ignoring a malformed frame", "err", err)
		return
	}
	delete(b.inflight, id)
	r.finish(nil, fmt.Errorf("prompt %s: %w: %v", id, ErrMalformedFrame, err))
	if b.conn != nil {
		b.conn.trySend(&protocol.Abort{ID: id})
	}
}

// fanOut delivers a display update to its prompt, or to every prompt in
// flight when the box did not say which (v1). b.mu is held.
func (b *Box) fanOut(promptID string, d DisplayEvent) {
	if promptID != "" {
		if r := b.inflight[promptID]; r != nil {
			r.ack()
			if !r.addDisplay(d) {
				b.overflow(r)
			}
		}
		return
	}
	for _, r := range b.inflight {
		if !r.addDisplay(d) {
			b.overflow(r)
		}
	}
}

// overflow fails a prompt whose reader fell too far behind and aborts it
// on the box. b.mu is held.
func (b *Box) overflow(r *Result) {
	delete(b.inflight, r.id)
	r.finish(nil, fmt.Errorf("prompt %s: %w (over %d bytes unread): read Result.Events and Result.Display while the prompt runs, or set PromptOptions.DiscardEvents", r.id, ErrBufferFull, b.opts.eventBuffer))
	if b.conn != nil {
		b.conn.trySend(&protocol.Abort{ID: r.id})
	}
}

func seqOf(m protocol.ServerMessage) uint64 {
	switch m := m.(type) {
	case *protocol.Event:
		return m.Seq
	case *protocol.DisplayPush:
		return m.Seq
	case *protocol.DisplayClear:
		return m.Seq
	case *protocol.Complete:
		return m.Seq
	case *protocol.Error:
		return m.Seq
	}
	return 0
}

// jitter spreads a delay over [d/2, d], so that clients dropped together
// do not redial together. n(k) returns a random value in [0, k).
func jitter(d time.Duration, n func(time.Duration) time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + n(d/2+1)
}

// nextDelay doubles a delay up to max.
func nextDelay(d, max time.Duration) time.Duration { return min(2*d, max) }
