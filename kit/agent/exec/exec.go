// Package exec is the built-in exec agent: each prompt's text runs as a
// shell command in the session's work directory.
//
// The command runs as a /bin/sh script with the session's environment
// (which carries GLOVEBOX_WORK, GLOVEBOX_INPUT and GLOVEBOX_OUTPUT), stdin
// from /dev/null, in a process group of its own. The text never appears on
// a command line, which every process of the box may read
// (/proc/PID/cmdline): the shell runs a fixed script, -c with PromptScript,
// that takes the text from the variable GLOVEBOX_PROMPT, removes it from
// its environment and evaluates it. The text behaves as under sh -c TEXT:
// $0 is the shell, the exit status, set -e and exit are the script's. One
// difference: the shell stays the text's parent to the end, where sh -c
// may replace itself with the last command, so a last command killed by a
// signal makes the shell exit with 128+n instead of dying of it. While it runs, its stdout and
// stderr stream to the client as "text_delta" events, each chunk split on a
// UTF-8 boundary:
//
//	{"text": "chunk", "stream": "stdout"}
//
// When the shell exits the agent sends an "exit" event ({"code": 0}, with
// "signal": "SIGKILL" and code 128+n when a signal ended it) and the prompt
// completes with the captured stdout as its message (the last MiB by
// default, with a note when earlier output was dropped). A non-zero exit
// status is not an error: the client reads it from the exit event. The kit
// collects output files as for any agent.
//
// Processes the command leaves in the background do not outlive the prompt:
// once the shell exits, the rest of its process group gets SIGTERM and,
// after a grace period, SIGKILL. Abort, a timeout or a closed socket does
// the same to the whole group at once, and Prompt returns the context's
// error.
package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Event types the exec agent emits.
const (
	EventTextDelta = "text_delta"
	EventExit      = "exit"
	EventSkill     = "skill"
)

// Stream names in a text_delta event.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Defaults for the options.
const (
	DefaultShell        = "/bin/sh"
	DefaultGrace        = 2 * time.Second
	DefaultMessageLimit = 1 << 20
)

const (
	// minDrain is how long the output of a stopped group may take to drain
	// before the pipes are cut, should a process outside the group still
	// hold them.
	minDrain = time.Second
)

// TextDelta is the data of a text_delta event.
type TextDelta struct {
	Text   string `json:"text"`
	Stream string `json:"stream"`
}

// Exit is the data of an exit event.
type Exit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	// Limit names the sandbox limit the session hit ("memory", "pids");
	// the prompt then ends with a LimitError.
	Limit string `json:"limit,omitempty"`
}

// Skill is the data of a skill event.
type Skill struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// PromptVar is the environment variable that carries the prompt's text
// to the shell, and PromptScript the shell's fixed command: it removes the
// variable from the environment the text's commands get, then evaluates
// the text.
const (
	PromptVar    = "GLOVEBOX_PROMPT"
	PromptScript = "eval \"unset " + PromptVar + "\n$" + PromptVar + "\""
)

// Option configures the exec agent.
type Option func(*config)

type config struct {
	shell        string
	grace        time.Duration
	messageLimit int
}

// WithShell runs commands with the shell at path instead of /bin/sh. The
// shell is called as path -c PromptScript, with the text in PromptVar.
func WithShell(path string) Option { return func(c *config) { c.shell = path } }

// WithGrace sets how long a process group has between SIGTERM and SIGKILL.
// A zero or negative d sends SIGKILL at once.
func WithGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithMessageLimit sets how many bytes of stdout, counted from the end, the
// prompt's final message keeps. The events always carry all of it.
func WithMessageLimit(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.messageLimit = n
		}
	}
}

// New returns the exec agent.
func New(opts ...Option) agent.Agent {
	c := config{shell: DefaultShell, grace: DefaultGrace, messageLimit: DefaultMessageLimit}
	for _, o := range opts {
		o(&c)
	}
	return &execAgent{cfg: c}
}

type execAgent struct{ cfg config }

var _ agent.Agent = (*execAgent)(nil)

// Open implements agent.Agent. The exec agent keeps no state between
// prompts.
func (a *execAgent) Open(_ context.Context, s *agent.Session) (agent.Conversation, error) {
	if s == nil {
		return nil, errors.New("exec: open: no session")
	}
	return &conversation{cfg: a.cfg, s: s}, nil
}

type conversation struct {
	cfg config
	s   *agent.Session
}

var _ agent.Conversation = (*conversation)(nil)

// Close implements agent.Conversation.
func (c *conversation) Close() error { return nil }

// chunk is one read from a stream; eof marks the stream's end.
type chunk struct {
	stream string
	data   []byte
	eof    bool
}

// Prompt implements agent.Conversation: it runs t.Text() and streams its
// output.
func (c *conversation) Prompt(ctx context.Context, t agent.Turn) (string, error) {
	for _, sk := range t.Skills() {
		if err := t.Emit(EventSkill, Skill{Name: sk.Name, Content: sk.Content}); err != nil {
			return "", emitErr(ctx, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	text := t.Text()
	if strings.IndexByte(text, 0) >= 0 {
		return "", errors.New("exec: the prompt text holds a NUL byte, which no shell command can")
	}
	r, err := c.start(text)
	if err != nil {
		return "", err
	}
	tail, err := r.stream(ctx, t)
	if err != nil {
		return "", err
	}
	st, err := r.proc.Wait()
	if err != nil {
		return "", fmt.Errorf("exec: wait: %w", err)
	}
	ex := Exit{Code: st.Code, Limit: st.Limit}
	if st.Signal != 0 {
		ex.Signal = sandbox.SignalName(st.Signal)
	}
	if err := t.Emit(EventExit, ex); err != nil {
		return "", emitErr(ctx, err)
	}
	if st.Limit != "" {
		return "", &agent.Error{Code: protocol.CodeLimit, Err: fmt.Errorf("exec: the command was stopped (%s): %s", st, sandbox.LimitMessage(st.Limit))}
	}
	return tail.String(), nil
}

// run is one prompt's command, from its start until it and its output
// have ended.
type run struct {
	cfg        config
	box        *sandbox.Session
	proc       *sandbox.Process
	outR, errR *os.File

	chunks   chan chunk
	quit     chan struct{}
	wg       sync.WaitGroup
	open     int  // streams not yet at their end
	exited   bool // the command has exited
	stopping bool
	drained  chan struct{} // closed once both streams ended
	stopped  chan struct{} // closed once everything was stopped
}

// start runs text with the shell in the session's sandbox, its output on
// two pipes, and starts reading them.
func (c *conversation) start(text string) (*run, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("exec: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("exec: stderr pipe: %w", err)
	}
	// never the kit's own environment, even by accident
	env := make([]string, 0, len(c.s.Env)+1)
	for _, kv := range c.s.Env {
		if !strings.HasPrefix(kv, PromptVar+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, PromptVar+"="+text)
	box := c.s.Sandbox
	if box == nil {
		box = sandbox.Plain()
	}
	proc, startErr := box.Start(sandbox.Spec{
		Path:   c.cfg.shell,
		Args:   []string{c.cfg.shell, "-c", PromptScript},
		Dir:    c.s.Dirs.Work,
		Env:    env,
		Stdout: outW,
		Stderr: errW,
	})
	outW.Close()
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("exec: start %s in %s: %w", c.cfg.shell, c.s.Dirs.Work, startErr)
	}
	r := &run{cfg: c.cfg, box: box, proc: proc, outR: outR, errR: errR,
		chunks: make(chan chunk), quit: make(chan struct{}), open: 2,
		drained: make(chan struct{}), stopped: make(chan struct{})}
	r.wg.Add(2)
	go readStream(&r.wg, outR, Stdout, r.chunks, r.quit)
	go readStream(&r.wg, errR, Stderr, r.chunks, r.quit)
	return r, nil
}

// stream emits the command's output as it comes until the command has
// exited and its output ended, and returns the tail of its stdout. When
// ctx ends or an event cannot be emitted, it stops the command first.
func (r *run) stream(ctx context.Context, t agent.Turn) (*tail, error) {
	out := newTail(r.cfg.messageLimit)
	procDone := r.proc.Done() // nil once seen: a closed channel is always ready
	for r.open > 0 || !r.exited {
		select {
		case ch := <-r.chunks:
			if ch.eof {
				if r.open--; r.open == 0 {
					close(r.drained)
				}
				continue
			}
			if ch.stream == Stdout {
				out.Write(ch.data)
			}
			if err := t.Emit(EventTextDelta, TextDelta{Text: string(ch.data), Stream: ch.stream}); err != nil {
				return nil, r.abort(emitErr(ctx, err))
			}
		case <-procDone:
			procDone = nil
			r.exited = true
			// Whatever the command left in the background goes with it.
			r.stop()
		case <-ctx.Done():
			return nil, r.abort(ctx.Err())
		}
	}
	r.finish()
	return out, nil
}

// stop ends everything the command started and, should a process that
// escaped every layer still hold a pipe, unblocks the readers once the
// output had time to drain; they read what the pipes still hold.
func (r *run) stop() {
	if r.stopping {
		return
	}
	r.stopping = true
	go func() {
		defer close(r.stopped)
		r.proc.Stop(r.cfg.grace)
		r.box.KillAll()
		timer := time.NewTimer(max(r.cfg.grace, minDrain))
		defer timer.Stop()
		select {
		case <-r.drained:
		case <-timer.C:
			r.outR.SetReadDeadline(time.Now())
			r.errR.SetReadDeadline(time.Now())
		}
	}()
}

// finish waits for everything start and stop started.
func (r *run) finish() {
	close(r.quit)
	r.wg.Wait()
	if !r.exited {
		<-r.proc.Done()
		r.exited = true
	}
	if r.open > 0 {
		close(r.drained)
		r.open = 0
	}
	if r.stopping {
		<-r.stopped
	}
	r.outR.Close()
	r.errR.Close()
}

// abort stops the command, waits for it, and returns err.
func (r *run) abort(err error) error {
	r.stop()
	r.finish()
	return err
}

// emitErr explains a failed Emit, preferring the context's error when the
// prompt was cancelled.
func emitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("exec: emit event: %w", err)
}

// readStream reads r until EOF (or an error) and sends its bytes on out in
// chunks that end on a UTF-8 boundary. It stops early when quit is closed.
func readStream(wg *sync.WaitGroup, r *os.File, stream string, out chan<- chunk, quit <-chan struct{}) {
	defer wg.Done()
	send := func(ch chunk) bool {
		select {
		case out <- ch:
			return true
		case <-quit:
			return false
		}
	}
	buf := make([]byte, 32<<10)
	held := 0 // bytes of an incomplete rune kept from the last read
	for {
		n, err := r.Read(buf[held:])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The pipe was cut because something outside the sandbox's
			// reach still holds its other end. What the pipe already
			// holds is output too: all of it is read, and nothing
			// written later.
			rest, derr := pending(r)
			if derr != nil {
				rest = nil
			}
			data := append(buf[:held:held], rest...)
			if len(data) > 0 && !send(chunk{stream: stream, data: data}) {
				return
			}
			send(chunk{stream: stream, eof: true})
			return
		}
		n += held
		held = 0
		if err != nil {
			// Flush everything, an incomplete rune included.
			if n > 0 && !send(chunk{stream: stream, data: append([]byte(nil), buf[:n]...)}) {
				return
			}
			send(chunk{stream: stream, eof: true})
			return
		}
		cut := utf8Cut(buf[:n])
		if cut > 0 && !send(chunk{stream: stream, data: append([]byte(nil), buf[:cut]...)}) {
			return
		}
		held = copy(buf, buf[cut:n])
	}
}

// pending reads the bytes the pipe r holds now, without waiting for more:
// as many as it held when pending was called, so that a writer that keeps
// writing cannot keep the read going. Its read deadline must have passed.
func pending(r *os.File) ([]byte, error) {
	rc, err := r.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		out  []byte
		rerr error
	)
	err = rc.Control(func(fd uintptr) {
		left, err := unix.IoctlGetInt(int(fd), ioctlInq)
		if err != nil {
			rerr = fmt.Errorf("exec: bytes left in the pipe: %w", err)
			return
		}
		out = make([]byte, 0, left)
		for len(out) < left {
			n, err := unix.Read(int(fd), out[len(out):left])
			if err == unix.EINTR {
				continue
			}
			if n <= 0 || err != nil {
				return // the fd is non-blocking: EAGAIN means empty
			}
			out = out[:len(out)+n]
		}
	})
	if err != nil {
		return nil, err
	}
	return out, rerr
}

// utf8Cut returns the length of the longest prefix of p that does not end
// inside a rune which later bytes could still complete. Invalid bytes are
// not held back.
func utf8Cut(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return i
			}
			break
		}
	}
	return len(p)
}

// tail keeps the last limit bytes written to it and counts the rest. Its
// buffer holds up to twice the limit, so that dropping old bytes costs one
// copy per limit bytes written.
type tail struct {
	limit int
	buf   []byte
	total int64
}

func newTail(limit int) *tail { return &tail{limit: limit} }

func (t *tail) Write(p []byte) {
	t.total += int64(len(p))
	if len(p) >= t.limit {
		t.buf = append(t.buf[:0], p[len(p)-t.limit:]...)
		return
	}
	if len(t.buf)+len(p) > 2*t.limit {
		keep := t.limit - len(p)
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
	}
	t.buf = append(t.buf, p...)
}

// String returns the kept bytes, starting on a rune boundary and preceded
// by a note when earlier output was dropped.
func (t *tail) String() string {
	b := t.buf
	if len(b) > t.limit {
		b = b[len(b)-t.limit:]
	}
	if t.total <= int64(len(b)) {
		return string(b)
	}
	for i := 0; i < utf8.UTFMax && i < len(b) && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return fmt.Sprintf("[stdout truncated: the last %d of %d bytes follow]\n%s", len(b), t.total, b)
}
