package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Terminals and processes in a session (/sessions/{id}/terminals and
// /sessions/{id}/processes; the box key, a token with the exec or admin
// scope, or the credential that opened the session). A session is named
// by its id: SessionID for this Box's own (Connect opens it), or one GET
// /sessions lists.

// Connect opens this Box's session, if it has none yet, and returns its
// id: the session's terminals and processes live as long as it does.
func (b *Box) Connect(ctx context.Context) (string, error) {
	if _, err := b.getConn(ctx); err != nil {
		return "", err
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if id := b.SessionID(); id != "" {
			return id, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return "", fmt.Errorf("box %q: waiting for the session's hello: %w", b.name, ctx.Err())
		}
	}
}

// sessionRoute is /sessions/{id}/{feature}[/{item}[/{sub}]].
func sessionRoute(session, feature string, parts ...string) (string, error) {
	for _, p := range append([]string{session}, parts...) {
		if p == "" || strings.ContainsAny(p, "/?#%") || p == "." || p == ".." {
			return "", fmt.Errorf("id %q: want an id the box gave", p)
		}
	}
	route := "sessions/" + session + "/" + feature
	for _, p := range parts {
		route += "/" + p
	}
	return route, nil
}

// call sends a request with the box's key and decodes a JSON answer into
// out (nil: none expected); any status but want is an error.
func (b *Box) call(ctx context.Context, method, route string, query url.Values, body io.Reader, want int, out any) error {
	u := b.route(route)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("box %q: %s %s: %w", b.name, strings.ToLower(method), route, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return statusError(fmt.Sprintf("box %q: %s %s", b.name, strings.ToLower(method), route), resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("box %q: %s is not the JSON expected: %w", b.name, route, err)
	}
	return nil
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// Terminals lists a session's terminals.
func (b *Box) Terminals(ctx context.Context, session string) ([]protocol.Terminal, error) {
	route, err := sessionRoute(session, "terminals")
	if err != nil {
		return nil, err
	}
	var list []protocol.Terminal
	return list, b.call(ctx, http.MethodGet, route, nil, nil, http.StatusOK, &list)
}

// StartTerminal starts a terminal in a session and attaches to it.
func (b *Box) StartTerminal(ctx context.Context, session string, req protocol.TerminalRequest) (*Terminal, error) {
	route, err := sessionRoute(session, "terminals")
	if err != nil {
		return nil, err
	}
	var info protocol.Terminal
	if err := b.call(ctx, http.MethodPost, route, nil, jsonBody(req), http.StatusCreated, &info); err != nil {
		return nil, err
	}
	t, err := b.AttachTerminal(ctx, session, info.ID)
	if err != nil {
		_ = b.DeleteTerminal(context.WithoutCancel(ctx), session, info.ID)
		return nil, err
	}
	return t, nil
}

// DeleteTerminal kills a terminal's command and forgets it.
func (b *Box) DeleteTerminal(ctx context.Context, session, id string) error {
	route, err := sessionRoute(session, "terminals", id)
	if err != nil {
		return err
	}
	return b.call(ctx, http.MethodDelete, route, nil, nil, http.StatusNoContent, nil)
}

// Terminal is an attached terminal: Read its output, Write its input
// (keystrokes, as a terminal's bytes), Resize it, Signal its command,
// Wait for its exit. One goroutine of its own reads the socket.
type Terminal struct {
	ID string

	ws   *wsconn.Conn
	wmu  sync.Mutex // one writer at a time
	pr   *io.PipeReader
	done chan struct{}
	exit *protocol.ExitInfo
	err  error
}

// AttachTerminal attaches to a terminal of a session (one client at a
// time).
func (b *Box) AttachTerminal(ctx context.Context, session, id string) (*Terminal, error) {
	route, err := sessionRoute(session, "terminals", id)
	if err != nil {
		return nil, err
	}
	u := b.ws.ResolveReference(&url.URL{Path: route})
	h := http.Header{}
	h.Set("Authorization", "Bearer "+b.ep.Key)
	ws, resp, err := wsconn.Dial(ctx, u.String(), wsconn.DialOptions{Header: h, HandshakeTimeout: b.opts.dialTimeout})
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, statusError(fmt.Sprintf("box %q: attach terminal %s", b.name, id), resp)
		}
		return nil, fmt.Errorf("box %q: attach terminal %s: %w", b.name, id, err)
	}
	ws.SetReadLimit(1 << 20)
	pr, pw := io.Pipe()
	t := &Terminal{ID: id, ws: ws, pr: pr, done: make(chan struct{})}
	go t.read(pw)
	return t, nil
}

func (t *Terminal) read(pw *io.PipeWriter) {
	defer close(t.done)
	for {
		binary, data, err := t.ws.ReadFrame()
		if err != nil {
			if t.exit == nil {
				t.err = fmt.Errorf("terminal %s: the connection ended before the command did: %w", t.ID, err)
			}
			pw.CloseWithError(io.EOF)
			return
		}
		if binary {
			if _, err := pw.Write(data); err != nil {
				// Nobody reads: keep going for the exit frame.
				continue
			}
			continue
		}
		var m protocol.TermControl
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch m.Type {
		case protocol.TermExit:
			t.exit = m.Exit
			if t.exit == nil {
				t.exit = &protocol.ExitInfo{Code: -1}
			}
		case protocol.TermError:
			t.err = errors.New("terminal " + t.ID + ": the box refused a control message: " + m.Message)
		}
	}
}

// Read reads the terminal's output; io.EOF once the terminal's socket
// has closed. Read it, or the box stops reading the command's output
// (and the command blocks).
func (t *Terminal) Read(p []byte) (int, error) { return t.pr.Read(p) }

// termFrame bounds an input frame: the box takes frames of up to 64 KiB.
const termFrame = 32 << 10

// Write sends input, as typed, in frames of at most 32 KiB.
func (t *Terminal) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	n := 0
	for n < len(p) {
		chunk := p[n:min(len(p), n+termFrame)]
		if err := t.ws.WriteBinary(chunk); err != nil {
			return n, err
		}
		n += len(chunk)
	}
	return n, nil
}

func (t *Terminal) control(m protocol.TermControl) error {
	b, _ := json.Marshal(m)
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.ws.WriteText(b)
}

// Resize sets the terminal's size.
func (t *Terminal) Resize(cols, rows int) error {
	return t.control(protocol.TermControl{Type: protocol.TermResize, Cols: cols, Rows: rows})
}

// Signal sends a signal ("SIGTERM") to the terminal's command's process
// group.
func (t *Terminal) Signal(sig string) error {
	return t.control(protocol.TermControl{Type: protocol.TermSignal, Signal: sig})
}

// Wait waits until the terminal's socket closes and returns how its
// command ended (nil with an error when the socket ended first).
func (t *Terminal) Wait(ctx context.Context) (*protocol.ExitInfo, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if t.exit != nil {
		return t.exit, nil
	}
	return nil, t.err
}

// Close detaches from the terminal (its command goes on; DeleteTerminal
// ends it).
func (t *Terminal) Close() error {
	t.wmu.Lock()
	_ = t.ws.WriteClose(wsconn.CloseNormal, "", time.Now().Add(time.Second))
	t.wmu.Unlock()
	err := t.ws.Close()
	<-t.done
	return err
}

// Processes lists a session's processes.
func (b *Box) Processes(ctx context.Context, session string) ([]protocol.Process, error) {
	route, err := sessionRoute(session, "processes")
	if err != nil {
		return nil, err
	}
	var list []protocol.Process
	return list, b.call(ctx, http.MethodGet, route, nil, nil, http.StatusOK, &list)
}

// StartProcess starts a long-running process in a session.
func (b *Box) StartProcess(ctx context.Context, session string, req protocol.ProcessRequest) (*protocol.Process, error) {
	route, err := sessionRoute(session, "processes")
	if err != nil {
		return nil, err
	}
	var p protocol.Process
	if err := b.call(ctx, http.MethodPost, route, nil, jsonBody(req), http.StatusCreated, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Process shows one process of a session.
func (b *Box) Process(ctx context.Context, session, id string) (*protocol.Process, error) {
	route, err := sessionRoute(session, "processes", id)
	if err != nil {
		return nil, err
	}
	var p protocol.Process
	if err := b.call(ctx, http.MethodGet, route, nil, nil, http.StatusOK, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SignalProcess sends a signal ("SIGTERM") to a process's group.
func (b *Box) SignalProcess(ctx context.Context, session, id, sig string) error {
	route, err := sessionRoute(session, "processes", id, "signal")
	if err != nil {
		return err
	}
	return b.call(ctx, http.MethodPost, route, nil, jsonBody(protocol.ProcessSignal{Signal: sig}), http.StatusNoContent, nil)
}

// DeleteProcess stops a process (SIGTERM, then SIGKILL after the box's
// grace) and forgets it.
func (b *Box) DeleteProcess(ctx context.Context, session, id string) error {
	route, err := sessionRoute(session, "processes", id)
	if err != nil {
		return err
	}
	return b.call(ctx, http.MethodDelete, route, nil, nil, http.StatusNoContent, nil)
}

// WriteStdin streams r to a process's stdin; closeAfter closes its stdin
// once r ends.
func (b *Box) WriteStdin(ctx context.Context, session, id string, r io.Reader, closeAfter bool) error {
	route, err := sessionRoute(session, "processes", id, "stdin")
	if err != nil {
		return err
	}
	q := url.Values{}
	if closeAfter {
		q.Set("close", "1")
	}
	return b.call(ctx, http.MethodPost, route, q, r, http.StatusNoContent, nil)
}

// OutputOptions choose a page of a process's output.
type OutputOptions struct {
	Stderr bool  // stderr; else stdout
	Offset int64 // the absolute offset to start at
	Limit  int   // bytes at most; 0 is the box's default page
	Follow bool  // ProcessOutput: read on until the stream ends or ctx does
}

func (o OutputOptions) query() url.Values {
	q := url.Values{}
	q.Set("stream", "stdout")
	if o.Stderr {
		q.Set("stream", "stderr")
	}
	q.Set("offset", strconv.FormatInt(o.Offset, 10))
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Follow {
		q.Set("follow", "1")
	}
	return q
}

// OutputPage is a page of a process's output, decoded.
type OutputPage struct {
	protocol.ProcessOutput
	Bytes []byte // Data, decoded
}

// ProcessOutput reads a process's output: one page, or with Follow every
// page until the stream ends (the last one says EOF and the exit), ctx
// ends or the box closes. A failure is the sequence's last element.
func (b *Box) ProcessOutput(ctx context.Context, session, id string, o OutputOptions) iter.Seq2[OutputPage, error] {
	return func(yield func(OutputPage, error) bool) {
		route, err := sessionRoute(session, "processes", id, "output")
		if err != nil {
			yield(OutputPage{}, err)
			return
		}
		u := b.route(route)
		u.RawQuery = o.query().Encode()
		err = b.jsonLines(ctx, u, route, func(line []byte) (bool, error) {
			var p OutputPage
			if err := json.Unmarshal(line, &p.ProcessOutput); err != nil {
				return false, fmt.Errorf("box %q: %s is not the JSON expected: %w", b.name, route, err)
			}
			if p.Bytes, err = base64.StdEncoding.DecodeString(p.Data); err != nil {
				return false, fmt.Errorf("box %q: %s: data is not base64: %w", b.name, route, err)
			}
			return yield(p, nil), nil
		})
		if err != nil {
			yield(OutputPage{}, err)
		}
	}
}
