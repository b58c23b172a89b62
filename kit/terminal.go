package kit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A session's terminals (/sessions/{id}/terminals): commands on PTYs in
// the session's sandbox, as the session's uid in its namespaces, cgroup,
// Landlock domain and egress policy (sandbox.Spec.TTY), each attached to
// at most one WebSocket at a time.
//
//	POST   /sessions/{id}/terminals        TerminalRequest → 201 Terminal
//	GET    /sessions/{id}/terminals        [Terminal]
//	GET    /sessions/{id}/terminals/{tid}  Terminal; as a WebSocket upgrade, attach
//	DELETE /sessions/{id}/terminals/{tid}  kill it (SIGKILL to its process group)
//
// On the attached WebSocket, binary frames are the terminal's bytes both
// ways; text frames are protocol.TermControl: resize and signal from the
// client, and from the box error (a control frame it refused) and, last,
// exit with the command's status, followed by a close frame.
//
// Memory is bounded whatever the client does: the box reads the PTY's
// master only while its output queue (termQueue chunks) has room, so a
// terminal nobody reads blocks its command's writes as a real terminal
// would; a client's input waits in the PTY's own buffer, then in the
// socket (the box stops reading the WebSocket while the PTY takes no
// more).

// Bounds of a terminal's output: chunks of up to termChunk bytes, at most
// termQueue of them waiting for a client.
const (
	termChunk = 16 << 10
	termQueue = 16
	// termReadLimit bounds a client's frame (input or control).
	termReadLimit = 64 << 10
)

type terminals struct {
	srv   *Server
	table execTable[*terminal]
}

type terminal struct {
	id      string
	command []string
	proc    *sandbox.Process
	master  *os.File
	// out carries the PTY's output to the attached client; closed once
	// the master reads no more (every holder of the slave is gone).
	out chan []byte

	mu       sync.Mutex
	cols     int
	rows     int
	attached bool
	endOnce  sync.Once
}

func newTerminals(s *Server) *terminals {
	t := &terminals{srv: s}
	t.table = execTable[*terminal]{
		prefix: "t", max: s.maxTerminals,
		end:  (*terminal).end,
		done: func(tm *terminal) bool { return ended(tm.proc) != nil },
	}
	return t
}

func (ts *terminals) feature() sessionFeature {
	return sessionFeature{name: "terminals", scope: protocol.ScopeExec, serve: ts.serve}
}

func (ts *terminals) serve(w http.ResponseWriter, r *http.Request, ss *session, rest string) {
	id, sub, ok := execPath(rest)
	if !ok || sub != "" {
		http.Error(w, "no such terminal route: /sessions/{id}/terminals[/{tid}]", http.StatusNotFound)
		return
	}
	if id == "" {
		switch r.Method {
		case http.MethodPost:
			ts.create(w, r, ss)
		case http.MethodGet:
			list := []protocol.Terminal{}
			for _, t := range ts.table.list(ss) {
				list = append(list, t.info())
			}
			writeJSON(w, http.StatusOK, list)
		default:
			methodNotAllowed(w, "GET, POST")
		}
		return
	}
	t, ok := ts.table.get(ss, id)
	if !ok {
		http.Error(w, "no terminal "+id+" in this session (GET /sessions/{id}/terminals lists them)", http.StatusNotFound)
		return
	}
	switch {
	case r.Method == http.MethodGet && wsconn.IsUpgrade(r):
		ts.attach(w, r, ss, t)
	case r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, t.info())
	case r.Method == http.MethodDelete:
		ts.table.remove(ss, id)
		w.WriteHeader(http.StatusNoContent)
	default:
		methodNotAllowed(w, "GET, DELETE")
	}
}

// create starts a terminal.
func (ts *terminals) create(w http.ResponseWriter, r *http.Request, ss *session) {
	body, err := readBody(r, protocol.MaxExecRequest)
	if err != nil {
		execError(w, err)
		return
	}
	req, err := protocol.DecodeTerminalRequest(body)
	if err != nil {
		execError(w, err)
		return
	}
	info, err := ss.sandboxed()
	if err != nil {
		execError(w, err)
		return
	}
	cols, rows := req.Cols, req.Rows
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	command := req.Command
	if len(command) == 0 {
		command = defaultShell(info.Env)
	}
	env := map[string]string{"TERM": "xterm-256color"}
	for k, v := range req.Env {
		env[k] = v
	}
	spec, err := execSpec(info, command, env, req.Dir)
	if err != nil {
		execError(w, err)
		return
	}
	t, err := ts.table.add(ss, func(id string) (*terminal, error) {
		master, slave, err := info.Sandbox.OpenPTY(uint16(cols), uint16(rows))
		if err != nil {
			return nil, err
		}
		spec.Stdin, spec.Stdout, spec.Stderr, spec.TTY = slave, slave, slave, true
		var p *sandbox.Process
		sandbox.OwnThread(func() { p, err = info.Sandbox.Start(spec) })
		slave.Close()
		if err != nil {
			master.Close()
			return nil, err
		}
		t := &terminal{id: id, command: command, proc: p, master: master, out: make(chan []byte, termQueue), cols: cols, rows: rows}
		go t.pump()
		return t, nil
	})
	if err != nil {
		execError(w, err)
		return
	}
	ss.logger().Info("terminal started", "terminal", t.id, "pid", t.proc.Pid())
	writeJSON(w, http.StatusCreated, t.info())
}

// pump reads the PTY's master into out, a chunk at a time, while out has
// room: a client that does not read stops the reading, and the command's
// writes block in the PTY.
func (t *terminal) pump() {
	defer close(t.out)
	buf := make([]byte, termChunk)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			// A copy of what was read: a keystroke's echo holds a byte,
			// not a chunk.
			t.out <- bytes.Clone(buf[:n])
		}
		if err != nil {
			// EIO: every holder of the slave closed it. Or end closed the
			// master.
			return
		}
	}
}

// end kills the terminal's command and closes its master.
func (t *terminal) end() {
	t.endOnce.Do(func() {
		t.proc.Kill()
		t.master.Close()
		// The pump may wait on a full queue nobody reads any more.
		go func() {
			for range t.out {
			}
		}()
	})
}

func (t *terminal) info() protocol.Terminal {
	t.mu.Lock()
	defer t.mu.Unlock()
	ti := protocol.Terminal{ID: t.id, Command: t.command, Pid: t.proc.Pid(), Cols: t.cols, Rows: t.rows, State: protocol.ExecRunning, Attached: t.attached}
	if e := ended(t.proc); e != nil {
		ti.State, ti.Exit = protocol.ExecExited, e
	}
	return ti
}

// attach serves the terminal on a WebSocket until the client leaves, the
// terminal's command ends or the session does.
func (ts *terminals) attach(w http.ResponseWriter, r *http.Request, ss *session, t *terminal) {
	t.mu.Lock()
	busy := t.attached
	t.attached = !busy
	t.mu.Unlock()
	if busy {
		http.Error(w, "terminal "+t.id+" is attached to another client already", http.StatusConflict)
		return
	}
	defer func() {
		t.mu.Lock()
		t.attached = false
		t.mu.Unlock()
	}()
	// A browser, which carries its bearer as a subprotocol, offers
	// glovebox.v1 with it, as on the session's own socket: that is the
	// one selected (never the bearer).
	c, err := wsconn.Upgrade(w, r, wsconn.UpgradeOptions{Subprotocols: []string{SubprotocolV1}})
	if err != nil {
		return // Upgrade answered
	}
	defer c.Close()
	c.SetReadLimit(termReadLimit)
	ping := ts.srv.pingInterval
	wait := 2 * ping
	_ = c.SetReadDeadline(time.Now().Add(wait))
	c.SetPongHandler(func() { _ = c.SetReadDeadline(time.Now().Add(wait)) })

	ctl := make(chan protocol.TermControl, 4)
	readerDone := make(chan struct{})
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		ts.write(c, ss, t, ctl, readerDone, wait)
	}()
	// Once the writer has gone (the client went, or the terminal
	// ended), a write to a PTY whose command reads nothing must not hold
	// the reader, and with it the terminal's attachment, forever.
	stop := make(chan struct{})
	go func() {
		select {
		case <-writerDone:
			_ = t.master.SetWriteDeadline(time.Unix(1, 0))
		case <-stop:
		}
	}()
	ts.read(c, t, ctl, writerDone)
	close(stop)
	close(readerDone)
	<-writerDone
	_ = t.master.SetWriteDeadline(time.Time{})
}

// read serves the client's frames: input to the PTY, control messages.
func (ts *terminals) read(c *wsconn.Conn, t *terminal, ctl chan<- protocol.TermControl, writerDone <-chan struct{}) {
	for {
		binary, data, err := c.ReadFrame()
		if err != nil {
			return
		}
		if binary {
			if _, err := t.master.Write(data); err != nil {
				return
			}
			continue
		}
		m, err := protocol.DecodeTermControl(data)
		switch {
		case err != nil:
			m = protocol.TermControl{Type: protocol.TermError, Message: err.Error()}
		case m.Type == protocol.TermResize:
			if err := sandbox.ResizePTY(t.master, uint16(m.Cols), uint16(m.Rows)); err != nil {
				m = protocol.TermControl{Type: protocol.TermError, Message: "resize: " + err.Error()}
			} else {
				t.mu.Lock()
				t.cols, t.rows = m.Cols, m.Rows
				t.mu.Unlock()
				continue
			}
		case m.Type == protocol.TermSignal:
			sig, _ := signalOf(m.Signal)
			if err := t.proc.Signal(sig); err != nil {
				m = protocol.TermControl{Type: protocol.TermError, Message: "signal: " + err.Error()}
			} else {
				continue
			}
		}
		select {
		case ctl <- m:
		case <-writerDone:
			return
		default: // a client that floods bad frames and reads none loses the errors
		}
	}
}

// write sends the terminal's output, control answers and pings, and at
// the end the exit frame and a close frame.
func (ts *terminals) write(c *wsconn.Conn, ss *session, t *terminal, ctl <-chan protocol.TermControl, readerDone <-chan struct{}, wait time.Duration) {
	tick := time.NewTicker(ts.srv.pingInterval)
	defer tick.Stop()
	defer c.Close() // ends the reader
	text := func(m protocol.TermControl) error {
		b, _ := json.Marshal(m)
		_ = c.SetWriteDeadline(time.Now().Add(wait))
		return c.WriteText(b)
	}
	for {
		select {
		case b, ok := <-t.out:
			if !ok {
				// The PTY is closed: the command has ended, or is ending.
				select {
				case <-t.proc.Done():
				case <-readerDone:
					return
				case <-ss.ctx.Done():
				}
				if text(protocol.TermControl{Type: protocol.TermExit, Exit: exitInfo(t.proc.Wait())}) == nil {
					_ = c.WriteClose(wsconn.CloseNormal, "the terminal's command ended", time.Now().Add(time.Second))
				}
				return
			}
			_ = c.SetWriteDeadline(time.Now().Add(wait))
			if c.WriteBinary(b) != nil {
				return
			}
		case m := <-ctl:
			if text(m) != nil {
				return
			}
		case <-tick.C:
			if c.Ping(time.Now().Add(wait)) != nil {
				return
			}
		case <-readerDone:
			return
		case <-ss.ctx.Done():
			_ = c.WriteClose(wsconn.CloseGoingAway, "the session has ended", time.Now().Add(time.Second))
			return
		}
	}
}
