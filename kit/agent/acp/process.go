package acp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// proc is one running agent process and its connection.
type proc struct {
	sp   *sandbox.Process
	conn *conn
	log  *slog.Logger

	exited chan struct{}      // closed once the process is reaped
	status sandbox.ExitStatus // how it ended, valid after exited
	err    error              // why its status is unknown, valid after exited

	stderrDone chan struct{}
	tailMu     sync.Mutex
	tail       []string // the last lines of stderr

	// Set by the conversation after session/new.
	sessionID   string
	prompted    bool   // a prompt was sent on this ACP session
	authMethods string // the auth method ids initialize listed
}

const stderrTail = 5

// errStopped is why the connection of an agent the kit stops closed.
var errStopped = errors.New("acp: agent stopped by the kit")

// startProc starts command in the session's sandbox, with stdin and
// stdout as the JSON-RPC channel and stderr lines going to log.
func startProc(box *sandbox.Session, command []string, dir string, env []string, h handler, log *slog.Logger, maxLine, maxInbound int) (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("acp: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("acp: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("acp: stderr pipe: %w", err)
	}
	sp, err := box.Start(sandbox.Spec{Path: command[0], Args: command, Dir: dir, Env: env, Stdin: inR, Stdout: outW, Stderr: errW})
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("acp: start agent %q: %w", command[0], err)
	}
	// The child has its copies; ours would keep the pipes open forever.
	closeAll(inR, outW, errW)

	p := &proc{
		sp:         sp,
		log:        log.With("pid", sp.Pid()),
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	p.conn = newConn(inW, outR, h, p.log, maxLine, maxInbound)
	go p.drainStderr(errR)
	go p.reap(inW, outR, errR)
	p.log.Info("acp: agent started", "command", command)
	return p, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// reap waits for the process, then makes sure nothing it left behind
// keeps the pipes open: it kills the process group and bounds how long
// the readers may still wait for buffered output.
func (p *proc) reap(inW, outR, errR *os.File) {
	p.status, p.err = p.sp.Wait()
	p.sp.Kill()
	deadline := time.Now().Add(2 * time.Second)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	<-p.conn.done
	<-p.stderrDone
	p.conn.shutdown(errConnClosed)
	closeAll(inW, outR, errR)
	p.log.Info("acp: agent exited", "status", p.exitStatus())
	close(p.exited)
}

func (p *proc) drainStderr(r *os.File) {
	defer close(p.stderrDone)
	br := bufio.NewReaderSize(r, 4096)
	const maxLine = 64 << 10
	var buf []byte
	for {
		line, err := readLine(br, maxLine, buf)
		var tooLong errLineTooLong
		if errors.As(err, &tooLong) {
			// Keep logging what follows: stderr is for people, not a protocol.
			p.log.Warn("acp: agent stderr line too long; skipped", "limit", maxLine)
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
			continue
		}
		if len(line) > 0 {
			s := strings.TrimRight(string(line), "\r\n")
			p.log.Info("acp: agent stderr", "line", s)
			p.tailMu.Lock()
			p.tail = append(p.tail, s)
			if len(p.tail) > stderrTail {
				p.tail = p.tail[1:]
			}
			p.tailMu.Unlock()
		}
		if err != nil {
			return
		}
		if cap(line) <= 4096 {
			buf = line
		}
	}
}

// signalGroup signals the agent and everything it started.
func (p *proc) signalGroup(sig syscall.Signal) {
	if err := p.sp.Signal(sig); err != nil {
		p.log.Warn("acp: signal the agent", "signal", sig, "err", err)
	}
}

// hasExited reports whether the process was reaped.
func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// alive reports whether the process and its connection are usable.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return p.conn.err() == nil
	}
}

// stop ends the process: SIGTERM to its group, SIGKILL after grace, and
// waits until it is reaped and its goroutines have returned.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		p.conn.wait()
		return
	default:
	}
	p.conn.shutdown(errStopped)
	p.signalGroup(syscall.SIGTERM)
	t := time.NewTimer(grace)
	select {
	case <-p.exited:
		t.Stop()
	case <-t.C:
		p.log.Warn("acp: agent ignored SIGTERM; killing it", "grace", grace)
		p.signalGroup(syscall.SIGKILL)
		<-p.exited
	}
	p.conn.wait()
}

// exitError describes how the process ended, for the prompt it broke.
func (p *proc) exitError(ctx context.Context, grace time.Duration, during string) error {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		return fmt.Errorf("acp: lost the connection to the agent: %w", p.conn.err())
	case <-ctx.Done():
		return fmt.Errorf("acp: lost the connection to the agent: %w", p.conn.err())
	}
	var b strings.Builder
	switch cause := p.conn.err(); {
	case errors.Is(cause, errStopped):
		fmt.Fprintf(&b, "acp: the agent process was stopped (%s) during %s", p.exitStatus(), during)
	case cause != nil && !errors.Is(cause, errConnClosed):
		fmt.Fprintf(&b, "%v; the agent was stopped (%s)", cause, p.exitStatus())
	default:
		fmt.Fprintf(&b, "acp: the agent process exited (%s) during %s", p.exitStatus(), during)
	}
	p.tailMu.Lock()
	if len(p.tail) > 0 {
		fmt.Fprintf(&b, "; last stderr: %s", strings.Join(p.tail, " | "))
	}
	p.tailMu.Unlock()
	b.WriteString("; the next prompt starts a new agent process")
	return errors.New(b.String())
}

// exitStatus describes how the process ended; valid after exited.
func (p *proc) exitStatus() string {
	if p.err != nil {
		return p.err.Error()
	}
	return p.status.String()
}
