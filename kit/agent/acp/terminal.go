package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// terminals are the commands the agent runs through terminal/*.
type terminals struct {
	c    *conversation
	mu   sync.Mutex
	next int
	m    map[string]*terminal
}

func newTerminals(c *conversation) *terminals {
	return &terminals{c: c, m: map[string]*terminal{}}
}

// terminal is one command in its own process group, with its combined
// output kept up to a byte limit.
type terminal struct {
	id string
	sp *sandbox.Process

	mu        sync.Mutex
	out       []byte
	limit     int
	truncated bool

	done   chan struct{} // closed when the command exited and its output is read
	status exitStatusJSON
}

type exitStatusJSON struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

func (ts *terminals) create(params json.RawMessage) (any, error) {
	var p struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Env     []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"env"`
		Cwd             *string `json:"cwd"`
		OutputByteLimit *int64  `json:"outputByteLimit"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, rpcErrorf(codeInvalidParams, "invalid params: %v", err)
	}
	if p.Command == "" {
		return nil, rpcErrorf(codeInvalidParams, "command is empty")
	}
	c := ts.c
	dir := workDir(c.s)
	if p.Cwd != nil && *p.Cwd != "" {
		a, rel, rerr := c.locate(*p.Cwd)
		if rerr != nil {
			return nil, rerr
		}
		dir = filepath.Join(a.dir, rel)
		if real, err := filepath.EvalSymlinks(dir); err != nil {
			return nil, fsError(*p.Cwd, err)
		} else if _, _, ok := c.match(real); !ok {
			return nil, c.outside(*p.Cwd)
		}
		if st, err := os.Stat(dir); err != nil {
			return nil, fsError(*p.Cwd, err)
		} else if !st.IsDir() {
			return nil, rpcErrorf(codeInvalidParams, "cwd %s is not a directory", *p.Cwd)
		}
	}
	limit := defaultTermOutput
	if p.OutputByteLimit != nil {
		limit = int(min(max(*p.OutputByteLimit, 0), maxTermOutput))
	}

	name, args := p.Command, p.Args
	if len(args) == 0 && strings.ContainsAny(name, " \t|&;<>()$`\"'*?") {
		if _, err := exec.LookPath(name); err != nil {
			// Some agents send a whole shell command line as the command.
			name, args = "/bin/sh", []string{"-c", p.Command}
		}
	}
	env := slices.Clone(c.env)
	for _, e := range p.Env {
		env = append(env, e.Name+"="+e.Value)
	}

	ts.mu.Lock()
	defer ts.mu.Unlock()
	if c.isClosed() {
		return nil, rpcErrorf(codeInternal, "the session is closed")
	}
	if len(ts.m) >= maxTerminals {
		return nil, rpcErrorf(codeInternal, "too many terminals (limit %d): release one first", maxTerminals)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("terminal output pipe: %w", err)
	}
	sp, err := c.s.Sandbox.Start(sandbox.Spec{Path: name, Args: append([]string{name}, args...), Dir: dir, Env: env, Stdout: w, Stderr: w})
	if err != nil {
		closeAll(r, w)
		return nil, rpcErrorf(codeInternal, "start %s: %v", p.Command, err)
	}
	_ = w.Close()
	ts.next++
	t := &terminal{id: fmt.Sprintf("term_%d", ts.next), sp: sp, limit: limit, done: make(chan struct{})}
	ts.m[t.id] = t
	go t.run(r)
	c.log.Info("acp: terminal started", "terminal", t.id, "command", p.Command, "args", p.Args, "cwd", dir)
	return map[string]string{"terminalId": t.id}, nil
}

func (c *conversation) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// run collects output until the command exits and its output ends. What
// the command left running in the background may hold the pipe; its
// output is read for a short while more.
func (t *terminal) run(r *os.File) {
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			t.append(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	st, _ := t.sp.Wait()
	_ = r.SetReadDeadline(time.Now().Add(time.Second))
	<-readDone
	_ = r.Close()
	t.mu.Lock()
	if st.Signal != 0 {
		sig := sandbox.SignalName(st.Signal)
		t.status.Signal = &sig
	} else {
		code := st.Code
		t.status.ExitCode = &code
	}
	t.mu.Unlock()
	close(t.done)
}

// append keeps the last limit bytes of output, cut at a character
// boundary.
func (t *terminal) append(b []byte) {
	if len(b) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.out = append(t.out, b...)
	if len(t.out) <= t.limit {
		return
	}
	t.truncated = true
	cut := len(t.out) - t.limit
	for cut < len(t.out) && !utf8.RuneStart(t.out[cut]) {
		cut++
	}
	t.out = append(t.out[:0], t.out[cut:]...)
}

func (ts *terminals) get(params json.RawMessage) (*terminal, error) {
	var p struct {
		TerminalID string `json:"terminalId"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, rpcErrorf(codeInvalidParams, "invalid params: %v", err)
	}
	ts.mu.Lock()
	t := ts.m[p.TerminalID]
	ts.mu.Unlock()
	if t == nil {
		return nil, rpcErrorf(codeNotFound, "unknown terminal %q", p.TerminalID)
	}
	return t, nil
}

func (ts *terminals) output(params json.RawMessage) (any, error) {
	t, err := ts.get(params)
	if err != nil {
		return nil, err
	}
	exited := false
	select {
	case <-t.done:
		exited = true
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	res := map[string]any{"output": string(t.out), "truncated": t.truncated}
	if exited {
		res["exitStatus"] = t.status
	}
	return res, nil
}

func (ts *terminals) waitForExit(ctx context.Context, params json.RawMessage) (any, error) {
	t, err := ts.get(params)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, rpcErrorf(codeCancelled, "request cancelled")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status, nil
}

func (ts *terminals) kill(params json.RawMessage) (any, error) {
	t, err := ts.get(params)
	if err != nil {
		return nil, err
	}
	t.killGroup()
	return map[string]any{}, nil
}

func (ts *terminals) release(params json.RawMessage) (any, error) {
	t, err := ts.get(params)
	if err != nil {
		return nil, err
	}
	ts.mu.Lock()
	delete(ts.m, t.id)
	ts.mu.Unlock()
	t.killGroup()
	<-t.done
	return map[string]any{}, nil
}

// killGroup kills the command and whatever it started.
func (t *terminal) killGroup() { t.sp.Kill() }

// killAll kills and forgets every terminal, and waits for them.
func (ts *terminals) killAll() {
	ts.mu.Lock()
	all := ts.m
	ts.m = map[string]*terminal{}
	ts.mu.Unlock()
	for _, t := range all {
		t.killGroup()
	}
	for _, t := range all {
		<-t.done
	}
}
