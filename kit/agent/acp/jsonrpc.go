package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
)

// JSON-RPC 2.0 error codes ACP uses.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeCancelled      = -32800
	codeAuthRequired   = -32000
	codeNotFound       = -32002
)

// rpcError is a JSON-RPC error object. It is also the error a handler
// returns to choose the code the agent sees.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	if len(e.Data) > 0 && string(e.Data) != "null" {
		return fmt.Sprintf("%s (code %d, data %s)", e.Message, e.Code, e.Data)
	}
	return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
}

func rpcErrorf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// message is any JSON-RPC 2.0 message: a request (method and id), a
// notification (method, no id) or a response (id, no method).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// response is what a call receives: the result or the error.
type response struct {
	result json.RawMessage
	err    error
}

// handler serves what the agent sends. request runs on its own goroutine
// and its ctx ends when the agent cancels the request or the connection
// closes; notify runs on the reader goroutine, in arrival order.
type handler interface {
	request(ctx context.Context, method string, params json.RawMessage) (any, error)
	notify(method string, params json.RawMessage)
	// quick may serve a line before it is decoded as a message, on the
	// reader goroutine; it reports whether it did.
	quick(line []byte) bool
}

// errConnClosed is the error a call gets when the connection ends before
// its response arrives.
var errConnClosed = errors.New("acp: connection to the agent closed")

// conn is one JSON-RPC connection over newline-delimited JSON: the client
// side of ACP. It writes to the agent's stdin and reads its stdout.
type conn struct {
	w       *os.File
	r       io.Reader
	log     *slog.Logger
	h       handler
	maxLine int
	sem     chan struct{} // bounds the agent's concurrent requests

	ctx    context.Context // ends when the connection closes
	cancel context.CancelCauseFunc

	wmu sync.Mutex // serialises writes

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan response
	inbound  map[string]context.CancelFunc // the agent's requests in flight, by raw id
	handlers sync.WaitGroup
	done     chan struct{} // closed when the reader returns
}

// newConn starts the reader goroutine. Close the connection with close.
func newConn(w *os.File, r io.Reader, h handler, log *slog.Logger, maxLine, maxInbound int) *conn {
	ctx, cancel := context.WithCancelCause(context.Background())
	c := &conn{
		w: w, r: r, h: h, log: log, maxLine: maxLine,
		sem:     make(chan struct{}, maxInbound),
		ctx:     ctx,
		cancel:  cancel,
		pending: make(map[int64]chan response),
		inbound: make(map[string]context.CancelFunc),
		done:    make(chan struct{}),
	}
	go c.read()
	return c
}

// errLineTooLong reports a line over the connection's size limit.
type errLineTooLong struct{ limit int }

func (e errLineTooLong) Error() string {
	return fmt.Sprintf("acp: the agent sent a message longer than %d bytes", e.limit)
}

// readLine reads one newline-terminated line of at most max bytes. An
// oversized line is an error: the stream cannot be resynchronised safely,
// since the rest of that line could be anything.
func readLine(br *bufio.Reader, max int, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > max+1 { // +1: the newline itself
			return nil, errLineTooLong{max}
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return buf, nil // a last line without its newline
		default:
			return buf, err
		}
	}
}

func (c *conn) read() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.r, 64<<10)
	var buf []byte
	var cause error
	for {
		line, err := readLine(br, c.maxLine, buf)
		if err != nil {
			var tooLong errLineTooLong
			switch {
			case errors.As(err, &tooLong):
				c.log.Error("acp: protocol violation: message too long; stopping the agent", "limit", c.maxLine)
				cause = err
			case errors.Is(err, io.EOF), errors.Is(err, os.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
				cause = errConnClosed
			default:
				cause = fmt.Errorf("acp: read from the agent: %w", err)
			}
			break
		}
		if cap(line) <= 1<<20 {
			buf = line // reuse small buffers; let big ones go
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		c.dispatch(line)
	}
	c.shutdown(cause)
}

// dispatch handles one line from the agent. Nothing an agent sends can
// crash the kit: malformed lines are logged and skipped.
func (c *conn) dispatch(line []byte) {
	if c.h.quick(line) {
		return
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		c.log.Error("acp: protocol violation: line is not a JSON-RPC message", "err", err, "line", clip(line))
		if line[0] == '{' || line[0] == '[' {
			c.reply(nil, nil, rpcErrorf(codeParseError, "parse error: %v", err))
		}
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	switch {
	case m.Method != "" && hasID:
		c.serve(m)
	case m.Method != "":
		if m.Method == "$/cancel_request" {
			c.cancelInbound(m.Params)
			return
		}
		c.h.notify(m.Method, m.Params)
	case hasID || m.Error != nil:
		c.resolve(m, line)
	default:
		c.log.Error("acp: protocol violation: message has neither method nor id", "line", clip(line))
		c.reply(nil, nil, rpcErrorf(codeInvalidRequest, "invalid request: no method and no id"))
	}
}

func (c *conn) resolve(m message, line []byte) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		if m.Error != nil {
			c.log.Error("acp: the agent reported an error about a message it could not identify", "err", m.Error)
		} else {
			c.log.Error("acp: protocol violation: response to an id the kit never used", "id", string(m.ID))
		}
		return
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	issued := id > 0 && id <= c.nextID
	c.mu.Unlock()
	if !ok {
		if issued {
			c.log.Debug("acp: late response to an abandoned request", "id", id)
		} else {
			c.log.Error("acp: protocol violation: response to an id the kit never used", "id", string(m.ID), "line", clip(line))
		}
		return
	}
	if m.Error != nil {
		ch <- response{err: m.Error}
		return
	}
	if m.Result == nil {
		m.Result = json.RawMessage("null")
	}
	ch <- response{result: m.Result}
}

// serve runs one of the agent's requests on its own goroutine.
func (c *conn) serve(m message) {
	select {
	case c.sem <- struct{}{}:
	default:
		c.log.Error("acp: the agent has too many requests in flight", "method", m.Method, "limit", cap(c.sem))
		c.reply(m.ID, nil, rpcErrorf(codeInternal, "too many concurrent requests (limit %d)", cap(c.sem)))
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	key := string(m.ID)
	c.mu.Lock()
	c.inbound[key] = cancel
	c.handlers.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.handlers.Done()
		defer func() { <-c.sem }()
		defer func() {
			c.mu.Lock()
			delete(c.inbound, key)
			c.mu.Unlock()
			cancel()
		}()
		result, err := c.h.request(ctx, m.Method, m.Params)
		if err != nil {
			var re *rpcError
			if !errors.As(err, &re) {
				re = &rpcError{Code: codeInternal, Message: err.Error()}
			}
			if ctx.Err() != nil && c.ctx.Err() == nil && re.Code == codeInternal {
				re = &rpcError{Code: codeCancelled, Message: "request cancelled"}
			}
			c.reply(m.ID, nil, re)
			return
		}
		c.reply(m.ID, result, nil)
	}()
}

func (c *conn) cancelInbound(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		c.log.Error("acp: protocol violation: bad $/cancel_request", "err", err)
		return
	}
	c.mu.Lock()
	cancel := c.inbound[string(p.RequestID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// reply answers one of the agent's requests.
func (c *conn) reply(id json.RawMessage, result any, rerr *rpcError) {
	m := map[string]any{"jsonrpc": "2.0"}
	if id == nil {
		m["id"] = nil
	} else {
		m["id"] = id
	}
	if rerr != nil {
		m["error"] = rerr
	} else {
		if result == nil {
			result = struct{}{}
		}
		m["result"] = result
	}
	if err := c.write(c.ctx, m); err != nil {
		c.log.Debug("acp: reply not sent", "err", err)
	}
}

// write sends one message as one line. A write blocked on a full pipe
// gives up when ctx ends; a half-written line ruins the stream, so any
// write error closes the connection.
func (c *conn) write(ctx context.Context, m any) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("acp: encode message: %w", err)
	}
	data = append(data, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := context.Cause(c.ctx); err != nil {
		return err
	}
	if ctx.Err() != nil { // nothing written yet: the stream is intact
		return context.Cause(ctx)
	}
	// The deadline is set on its own goroutine: when ctx ends just as the
	// write completes, it must be set before it is cleared, or it would
	// stay in the past and fail every later write on a healthy stream.
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.w.SetWriteDeadline(time.Unix(1, 0))
		close(cut)
	})
	_, err = c.w.Write(data)
	if !stop() {
		<-cut
		_ = c.w.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		err = fmt.Errorf("acp: write to the agent: %w", err)
		c.shutdown(err)
		return err
	}
	return nil
}

// call sends a request and returns a channel that receives its response,
// or an error when the connection closes first.
func (c *conn) call(ctx context.Context, method string, params any) (int64, <-chan response) {
	ch := make(chan response, 1)
	c.mu.Lock()
	if err := context.Cause(c.ctx); err != nil {
		c.mu.Unlock()
		ch <- response{err: err}
		return 0, ch
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	err := c.write(ctx, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil && c.forget(id) {
		ch <- response{err: err}
	}
	return id, ch
}

// forget abandons a request whose caller no longer waits. It reports
// whether the request was still pending: whoever takes a request out of
// pending is the one who answers its channel.
func (c *conn) forget(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[id]
	delete(c.pending, id)
	return ok
}

// roundTrip calls method and decodes its result into out.
func (c *conn) roundTrip(ctx context.Context, method string, params, out any) error {
	id, ch := c.call(ctx, method, params)
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if out != nil {
			if err := json.Unmarshal(r.result, out); err != nil {
				return fmt.Errorf("%s: protocol violation: bad result %s: %w", method, clip(r.result), err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	}
}

// notifyAgent sends a notification.
func (c *conn) notifyAgent(ctx context.Context, method string, params any) error {
	return c.write(ctx, map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// shutdown closes the connection with cause: pending calls fail and the
// agent's requests in flight are cancelled. It is idempotent.
func (c *conn) shutdown(cause error) {
	c.cancel(cause)
	c.mu.Lock()
	pending := c.pending
	c.pending = map[int64]chan response{}
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- response{err: context.Cause(c.ctx)}
	}
}

// err is why the connection closed, or nil while it is open.
func (c *conn) err() error { return context.Cause(c.ctx) }

// wait waits for the reader and every request handler to return. Call it
// after the agent's stdout was closed.
func (c *conn) wait() {
	<-c.done
	c.handlers.Wait()
}

// clip shortens a line for a log record.
func clip(b []byte) string {
	const n = 512
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
