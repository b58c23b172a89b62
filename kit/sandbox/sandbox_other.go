//go:build !linux

package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Sandbox is the portable fallback: no layer is available off Linux.
type Sandbox struct {
	cfg    Config
	report Report
}

// New reports that no layer is available on this platform.
func New(cfg Config, _ *slog.Logger) (*Sandbox, error) {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	why := "needs Linux"
	return &Sandbox{cfg: cfg, report: Report{Inactive: map[string]string{
		LayerUsers: why, LayerPrivileges: why, LayerMount: why, LayerPID: why, LayerNetwork: why, LayerCgroup: why,
	}}}, nil
}

// Report says which layers are in force: none.
func (sb *Sandbox) Report() Report { return sb.report }

// Plain returns a session without any layer.
func Plain() *Session { return &Session{procs: map[*Process]struct{}{}} }

// Open returns a session without any layer.
func (sb *Sandbox) Open(string, []string) (*Session, error) { return Plain(), nil }

// OpenSession makes session id's directories under Config.SessionRoots
// (the roots themselves with SharedDirs) and returns a session without
// any layer, which removes them when it closes.
func (sb *Sandbox) OpenSession(id string) (*Session, error) {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return nil, fmt.Errorf("sandbox: session id %q cannot name a directory", id)
	}
	ss := Plain()
	ss.dirs = make([]string, len(sb.cfg.SessionRoots))
	for i, r := range sb.cfg.SessionRoots {
		if r == "" {
			continue
		}
		d := r
		if !sb.cfg.SharedDirs {
			d = filepath.Join(r, id)
			ss.remove = append(ss.remove, d)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			ss.Close()
			return nil, fmt.Errorf("sandbox: make the session's directory: %w", err)
		}
		ss.dirs[i] = d
	}
	return ss, nil
}

// Dirs are the session's directories as OpenSession made them.
func (ss *Session) Dirs() []string { return ss.dirs }

// Clear empties the session's work directory.
func (ss *Session) Clear() error {
	if len(ss.dirs) == 0 || ss.dirs[0] == "" {
		return nil
	}
	entries, err := os.ReadDir(ss.dirs[0])
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(ss.dirs[0], e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// DiskUsed adds up the sizes of the regular files in the session's
// directories.
func (ss *Session) DiskUsed() (int64, error) {
	var n int64
	for _, d := range ss.dirs {
		if d == "" {
			continue
		}
		_ = filepath.WalkDir(d, func(_ string, e os.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if info, err := e.Info(); err == nil {
					n += info.Size()
				}
			}
			return nil
		})
	}
	return n, nil
}

// Close does nothing: no sandbox holds anything.
func (sb *Sandbox) Close() error { return nil }

// Session runs processes as the kit's user.
type Session struct {
	dirs       []string // OpenSession's
	remove     []string // removed by Close
	OnListener func(net.Listener)
	ProxyAddr  string
	ConfineNet bool
	EgressPort int
	ListenPort int
	mu         sync.Mutex
	procs      map[*Process]struct{}
}

// UID is -1: sessions run as the kit's uid.
func (ss *Session) UID() int { return -1 }

// Chown does nothing.
func (ss *Session) Chown(string) error { return nil }

// TmpDir is "": sessions have no temporary directory of their own.
func (ss *Session) TmpDir() string { return "" }

// Start runs spec in its own process group.
func (ss *Session) Start(spec Spec) (*Process, error) {
	if ss == nil {
		ss = Plain()
	}
	cmd := exec.Command(spec.Path, spec.Args[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, spec.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if spec.TTY && spec.Stdin != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	ss.mu.Lock()
	ss.procs[p] = struct{}{}
	ss.mu.Unlock()
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.status = StatusOf(ws)
		} else {
			p.err = err
		}
		ss.mu.Lock()
		delete(ss.procs, p)
		ss.mu.Unlock()
	}()
	return p, nil
}

// OpenPTY is the package's OpenPTY: terminals need Linux.
func (ss *Session) OpenPTY(cols, rows uint16) (master, slave *os.File, err error) {
	return OpenPTY(cols, rows)
}

// KillAll kills the process groups the session started.
func (ss *Session) KillAll() {
	if ss == nil {
		return
	}
	ss.mu.Lock()
	procs := make([]*Process, 0, len(ss.procs))
	for p := range ss.procs {
		procs = append(procs, p)
	}
	ss.mu.Unlock()
	for _, p := range procs {
		p.Kill()
		<-p.done
	}
}

// Close kills the session's processes and removes the directories
// OpenSession made.
func (ss *Session) Close() error {
	ss.KillAll()
	var first error
	for _, d := range ss.remove {
		if err := os.RemoveAll(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Process is a started command.
type Process struct {
	cmd    *exec.Cmd
	done   chan struct{}
	status ExitStatus
	err    error
}

// Pid is the process's pid.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait returns how the command ended.
func (p *Process) Wait() (ExitStatus, error) { <-p.done; return p.status, p.err }

// Signal signals the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// Kill kills the process group.
func (p *Process) Kill() { _ = p.Signal(syscall.SIGKILL) }

// Stop sends SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.Kill()
	<-p.done
}

// Reclaim has nothing to reclaim where there are no cgroups.
func (sb *Sandbox) Reclaim(string) bool { return false }

// ReclaimProcesses does nothing: there are no cgroups.
func (sb *Sandbox) ReclaimProcesses(string) bool { return false }

// Release is Close.
func (ss *Session) Release() error { return ss.Close() }

// Warm does nothing: there is no supervisor to start.
func (ss *Session) Warm() error { return nil }

// Lost is nil: there is no supervisor to lose.
func (ss *Session) Lost() <-chan struct{} { return nil }

// SupervisorPid is 0: there is no supervisor.
func (ss *Session) SupervisorPid() int { return 0 }

// SupervisorMain says that sandbox supervisors run on Linux only.
func SupervisorMain() int {
	os.Stderr.WriteString("glovebox-sandbox: the sandbox supervisor runs on Linux only\n")
	return 2
}

// MaybeSupervise does nothing: sandbox supervisors run on Linux only.
func MaybeSupervise() {}

// Remote is false: there is no monitor off Linux.
func (sb *Sandbox) Remote() bool { return false }

// Dial fails: privilege separation is Linux only.
func Dial(*os.File, *slog.Logger) (*Sandbox, error) {
	return nil, errors.New("sandbox: a monitor runs on Linux only")
}

// MonitorGone is nil: there is no monitor off Linux.
func (sb *Sandbox) MonitorGone() <-chan struct{} { return nil }

// Helper is Linux only.
type Helper struct{}

// Helper fails: the session helper is Linux only.
func (ss *Session) Helper() (*Helper, error) {
	return nil, errNoHelper
}

var errNoHelper = errors.New("sandbox: the session helper runs on Linux only")

// Open fails off Linux.
func (h *Helper) Open(Root, string, int, uint32) (*os.File, error) { return nil, errNoHelper }

// Mkdir fails off Linux.
func (h *Helper) Mkdir(Root, string, uint32) error { return errNoHelper }

// MkdirAll fails off Linux.
func (h *Helper) MkdirAll(Root, string, uint32) error { return errNoHelper }

// Rename fails off Linux.
func (h *Helper) Rename(Root, string, Root, string) error { return errNoHelper }

// Remove fails off Linux.
func (h *Helper) Remove(Root, string) error { return errNoHelper }

// RemoveAll fails off Linux.
func (h *Helper) RemoveAll(Root, string) error { return errNoHelper }

// Watch fails off Linux.
func (h *Helper) Watch(*os.File, Root, string, uint32) (int, error) { return 0, errNoHelper }

// Dial fails off Linux.
func (h *Helper) Dial(int) (*os.File, error) { return nil, errNoHelper }

// ErrCannotPause: pausing needs a cgroup freezer, which is Linux only.
var ErrCannotPause = errors.New("sandbox: pausing a session needs a cgroup freezer (Linux only)")

// Pause fails off Linux.
func (ss *Session) Pause() error { return ErrCannotPause }

// Wake does nothing off Linux: nothing is ever paused.
func (ss *Session) Wake() error { return nil }

// Paused is false off Linux.
func (ss *Session) Paused() bool { return false }

// Chmod fails off Linux.
func (h *Helper) Chmod(Root, string, uint32) error { return errNoHelper }

// Chtimes fails off Linux.
func (h *Helper) Chtimes(Root, string, time.Time) error { return errNoHelper }
