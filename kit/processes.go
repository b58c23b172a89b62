package kit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A session's processes (/sessions/{id}/processes): long-running commands
// outside the prompt flow (a dev server, a watcher), in the session's
// sandbox, with the session's environment and its work directory. They
// end with the session.
//
//	POST   /sessions/{id}/processes                 ProcessRequest → 201 Process
//	GET    /sessions/{id}/processes                 [Process]
//	GET    /sessions/{id}/processes/{pid}           Process
//	GET    /sessions/{id}/processes/{pid}/output    ?stream=stdout|stderr&offset=N[&limit=N][&follow=1] → ProcessOutput (NDJSON with follow)
//	POST   /sessions/{id}/processes/{pid}/stdin     the body, streamed to its stdin; ?close=1 closes stdin after it
//	POST   /sessions/{id}/processes/{pid}/signal    ProcessSignal → 204
//	DELETE /sessions/{id}/processes/{pid}           SIGTERM, SIGKILL after the grace, and forget it → 204
//
// Each stream of a process is kept in a ring of procRing bytes: the kit
// reads its pipe at any pace the process writes, keeps the latest bytes
// and counts the rest as dropped, so a process that floods its output
// costs the kit no more than the ring.

// Bounds of a process's output.
const (
	procRing     = 1 << 20 // bytes kept per stream
	procPage     = 64 << 10
	procMaxPage  = 1 << 20
	procReadSize = 32 << 10
)

var streamNames = [2]string{"stdout", "stderr"}

type processes struct {
	srv   *Server
	table execTable[*process]
}

type process struct {
	id      string
	command []string
	proc    *sandbox.Process
	streams [2]*ring

	stdinMu sync.Mutex
	stdin   *os.File // nil once closed
	inPipe  *os.File // stdin as made, never reassigned: end sets its deadline without stdinMu
	endOnce sync.Once
}

func newProcesses(s *Server) *processes {
	p := &processes{srv: s}
	p.table = execTable[*process]{
		prefix: "p", max: s.maxProcesses,
		end:  (*process).end,
		done: func(p *process) bool { return ended(p.proc) != nil },
	}
	return p
}

func (ps *processes) feature() sessionFeature {
	return sessionFeature{name: "processes", scope: protocol.ScopeExec, serve: ps.serve}
}

func (ps *processes) serve(w http.ResponseWriter, r *http.Request, ss *session, rest string) {
	id, sub, ok := execPath(rest)
	if !ok {
		http.Error(w, "no such process route: /sessions/{id}/processes[/{pid}[/output|/stdin|/signal]]", http.StatusNotFound)
		return
	}
	if id == "" {
		switch r.Method {
		case http.MethodPost:
			ps.create(w, r, ss)
		case http.MethodGet:
			list := []protocol.Process{}
			for _, p := range ps.table.list(ss) {
				list = append(list, p.info())
			}
			writeJSON(w, http.StatusOK, list)
		default:
			methodNotAllowed(w, "GET, POST")
		}
		return
	}
	p, ok := ps.table.get(ss, id)
	if !ok {
		http.Error(w, "no process "+id+" in this session (GET /sessions/{id}/processes lists them)", http.StatusNotFound)
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, p.info())
	case sub == "" && r.Method == http.MethodDelete:
		sandbox.OwnThread(func() { p.proc.Stop(sandbox.DefaultGrace) })
		ps.table.remove(ss, id)
		w.WriteHeader(http.StatusNoContent)
	case sub == "":
		methodNotAllowed(w, "GET, DELETE")
	case sub == "output" && r.Method == http.MethodGet:
		ps.output(w, r, ss, p)
	case sub == "stdin" && r.Method == http.MethodPost:
		ps.writeStdin(w, r, p)
	case sub == "signal" && r.Method == http.MethodPost:
		if err := signalProcess(r, p); err != nil {
			execError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case sub == "output" || sub == "stdin" || sub == "signal":
		methodNotAllowed(w, map[string]string{"output": "GET", "stdin": "POST", "signal": "POST"}[sub])
	default:
		http.Error(w, "no such process route: /sessions/{id}/processes/{pid}[/output|/stdin|/signal]", http.StatusNotFound)
	}
}

// signalProcess sends the signal a request names.
func signalProcess(r *http.Request, p *process) error {
	body, err := readBody(r, 4096)
	if err != nil {
		return err
	}
	var req protocol.ProcessSignal
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf(`the body is not {"signal":"SIGTERM"}: %w`, err)
	}
	sig, err := signalOf(req.Signal)
	if err != nil {
		return err
	}
	return p.proc.Signal(sig)
}

// create starts a process.
func (ps *processes) create(w http.ResponseWriter, r *http.Request, ss *session) {
	body, err := readBody(r, protocol.MaxExecRequest)
	if err != nil {
		execError(w, err)
		return
	}
	req, err := protocol.DecodeProcessRequest(body)
	if err != nil {
		execError(w, err)
		return
	}
	info, err := ss.sandboxed()
	if err != nil {
		execError(w, err)
		return
	}
	spec, err := execSpec(info, req.Command, req.Env, req.Dir)
	if err != nil {
		execError(w, err)
		return
	}
	p, err := ps.table.add(ss, func(id string) (*process, error) {
		var files []*os.File // the child's ends, closed once it started
		defer func() { closeAll(files) }()
		inR, inW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		files = append(files, inR)
		p := &process{id: id, command: req.Command, stdin: inW, inPipe: inW}
		var outs [2]*os.File
		for i := range outs {
			rd, wr, err := os.Pipe()
			if err != nil {
				inW.Close()
				closeAll(outs[:i])
				return nil, err
			}
			files = append(files, wr)
			outs[i] = rd
			p.streams[i] = &ring{size: procRing, changed: make(chan struct{})}
		}
		spec.Stdin, spec.Stdout, spec.Stderr = inR, files[1], files[2]
		sandbox.OwnThread(func() { p.proc, err = info.Sandbox.Start(spec) })
		if err != nil {
			inW.Close()
			closeAll(outs[:])
			return nil, err
		}
		for i, rd := range outs {
			go p.streams[i].fill(rd)
		}
		return p, nil
	})
	if err != nil {
		execError(w, err)
		return
	}
	ss.logger().Info("process started", "process", p.id, "pid", p.proc.Pid())
	writeJSON(w, http.StatusCreated, p.info())
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

func (p *process) info() protocol.Process {
	pi := protocol.Process{ID: p.id, Command: p.command, Pid: p.proc.Pid(), State: protocol.ExecRunning,
		Stdout: p.streams[0].written(), Stderr: p.streams[1].written()}
	if e := ended(p.proc); e != nil {
		pi.State, pi.Exit = protocol.ExecExited, e
	}
	return pi
}

// end kills the process and closes its stdin; its streams end once
// every holder of their pipes is gone.
func (p *process) end() {
	p.endOnce.Do(func() {
		p.proc.Kill()
		// A POST .../stdin may hold stdinMu, blocked on a pipe a process
		// outside the killed group keeps and does not read: cut it.
		if p.inPipe != nil {
			_ = p.inPipe.SetWriteDeadline(time.Unix(1, 0))
		}
		p.stdinMu.Lock()
		if p.stdin != nil {
			p.stdin.Close()
			p.stdin = nil
		}
		p.stdinMu.Unlock()
	})
}

// writeStdin streams the request's body to the process's stdin.
func (ps *processes) writeStdin(w http.ResponseWriter, r *http.Request, p *process) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		http.Error(w, "the process's stdin is closed", http.StatusConflict)
		return
	}
	// A process that reads nothing must not hold the request forever once
	// its client gives up.
	stop := context.AfterFunc(r.Context(), func() { _ = p.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	n, err := io.Copy(p.stdin, r.Body)
	if !stop() {
		err = errors.Join(err, r.Context().Err())
	}
	_ = p.stdin.SetWriteDeadline(time.Time{})
	if err != nil {
		http.Error(w, fmt.Sprintf("wrote %d bytes to the process's stdin, then: %v", n, err), http.StatusConflict)
		return
	}
	if r.URL.Query().Get("close") == "1" {
		p.stdin.Close()
		p.stdin = nil
	}
	w.WriteHeader(http.StatusNoContent)
}

// output answers a page of a stream, or with follow=1 streams it as
// NDJSON until it ends, the client leaves or the session ends.
func (ps *processes) output(w http.ResponseWriter, r *http.Request, ss *session, p *process) {
	q := r.URL.Query()
	i := 0
	switch q.Get("stream") {
	case "", "stdout":
	case "stderr":
		i = 1
	default:
		http.Error(w, "stream is stdout or stderr", http.StatusBadRequest)
		return
	}
	offset, err := queryInt(q.Get("offset"), 0)
	if err != nil || offset < 0 {
		http.Error(w, "offset is a byte offset in the stream: 0 or more", http.StatusBadRequest)
		return
	}
	limit, err := queryInt(q.Get("limit"), procPage)
	if err != nil || limit < 1 || limit > procMaxPage {
		http.Error(w, fmt.Sprintf("limit is 1 to %d bytes", procMaxPage), http.StatusBadRequest)
		return
	}
	rg := p.streams[i]
	if q.Get("follow") != "1" {
		page, _ := rg.page(streamNames[i], offset, int(limit))
		if page.EOF {
			page.Exit = ended(p.proc)
		}
		writeJSON(w, http.StatusOK, page)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		page, changed := rg.page(streamNames[i], offset, int(limit))
		if page.EOF {
			select {
			case <-p.proc.Done():
			case <-r.Context().Done():
				return
			case <-ss.ctx.Done():
			}
			page.Exit = ended(p.proc)
		}
		if page.Data != "" || page.Dropped > 0 || page.EOF {
			if enc.Encode(page) != nil || rc.Flush() != nil {
				return
			}
		}
		if page.EOF {
			return
		}
		offset = page.Next
		if page.Data != "" {
			continue // more may be held already
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-ss.ctx.Done():
			return
		}
	}
}

func queryInt(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// ring keeps the latest size bytes of a stream, addressed by absolute
// offsets. Its buffer grows as bytes come, up to size.
type ring struct {
	size int

	mu      sync.Mutex
	buf     []byte
	end     int64         // bytes written in all
	eof     bool          // the stream has ended
	changed chan struct{} // closed (and replaced) when end or eof change
}

// fill reads rd into the ring until it ends, then closes it.
func (g *ring) fill(rd *os.File) {
	defer rd.Close()
	buf := make([]byte, procReadSize)
	for {
		n, err := rd.Read(buf)
		if n > 0 {
			g.write(buf[:n])
		}
		if err != nil {
			g.mu.Lock()
			g.eof = true
			g.wake()
			g.mu.Unlock()
			return
		}
	}
}

func (g *ring) wake() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *ring) write(p []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(p) > g.size {
		g.end += int64(len(p) - g.size)
		p = p[len(p)-g.size:]
	}
	if room := g.size - len(g.buf); room > 0 {
		k := min(room, len(p))
		if len(g.buf)+k > cap(g.buf) {
			// Grown by doubling, never past size.
			grown := make([]byte, len(g.buf), min(g.size, max(2*cap(g.buf), len(g.buf)+k)))
			copy(grown, g.buf)
			g.buf = grown
		}
		g.buf = append(g.buf, p[:k]...)
		g.end += int64(k)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(g.buf[g.end%int64(g.size):], p)
		g.end += int64(k)
		p = p[k:]
	}
	g.wake()
}

func (g *ring) written() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.end
}

// page is up to limit bytes from offset (or from the oldest byte held,
// counting those dropped), and the channel that is closed when more
// comes.
func (g *ring) page(stream string, offset int64, limit int) (protocol.ProcessOutput, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	offset = min(offset, g.end)
	lo := max(0, g.end-int64(len(g.buf)))
	out := protocol.ProcessOutput{Stream: stream, Offset: offset}
	if offset < lo {
		out.Dropped = lo - offset
		out.Offset = lo
	}
	n := int(min(g.end-out.Offset, int64(limit)))
	data := make([]byte, 0, n)
	for o := out.Offset; len(data) < n; {
		i := int(o % int64(g.size))
		k := min(n-len(data), len(g.buf)-i)
		data = append(data, g.buf[i:i+k]...)
		o += int64(k)
	}
	out.Data = base64.StdEncoding.EncodeToString(data)
	out.Next = out.Offset + int64(n)
	out.EOF = g.eof && out.Next == g.end
	return out, g.changed
}
