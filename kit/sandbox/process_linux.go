package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a command running in a sandbox.
type Process struct {
	cmd      *exec.Cmd // nil for a command of a session's supervisor
	ss       *Session
	pidns    bool // the supervisor is pid 1 of its namespace
	listener net.Listener
	specW    *os.File // the supervisor's spec pipe, open while it should live

	// A command of a session's supervisor.
	sup *sessionSup
	id  uint64
	pid int // in the kit's pid namespace

	cg          *cgroup
	oom0, pids0 int64 // the cgroup's events when the command started

	done   chan struct{}
	status ExitStatus
	err    error
}

// startSupervisor starts sup cloned with flags, puts it in cg, hands it is
// (a probe's or a session's) and waits until it is ready. A session's
// supervisor gets ctl, its control socket, as fdControl.
func startSupervisor(sup *supervisor, is *initSpec, flags uintptr, cg *cgroup, ctl *os.File) (*Process, error) {
	is.Version = Version()
	fs, err := openSupFiles(is.Net != nil && is.Net.ProxyAddr != "")
	if err != nil {
		return nil, err
	}
	defer closeFiles(fs.sockChild)
	specW, statR, sockKit := fs.specW, fs.statR, fs.sockKit
	cmd := &exec.Cmd{
		Path: sup.cmdPath(),
		Args: []string{InitName},
		// Nothing of the kit's environment: only what makes a race-enabled
		// build exit at once instead of a second later.
		Env:        []string{"GORACE=atexit_sleep_ms=0"},
		Dir:        "/",
		ExtraFiles: fs.childFiles(ctl),
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: flags,
			Setpgid:    true,
		},
	}
	userns := flags&syscall.CLONE_NEWUSER != 0
	if userns {
		// Mapped once it runs (mapUserNS), then executed again.
		cmd.Args = append(cmd.Args, argUserNS)
	}
	err = startOnOwnThread(cmd)
	runtime.KeepAlive(sup) // its descriptor is the path just executed
	closeFiles(fs.specR, fs.statW)
	if err != nil {
		closeFiles(specW, statR, sockKit)
		return nil, fmt.Errorf("sandbox: start the supervisor: %w", err)
	}
	p := &Process{cmd: cmd, pidns: flags&syscall.CLONE_NEWPID != 0, done: make(chan struct{}), specW: specW}
	fail := func(err error) (*Process, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		closeFiles(specW, statR, sockKit)
		return nil, err
	}
	if cg != nil {
		if err := cg.add(cmd.Process.Pid); err != nil {
			return fail(fmt.Errorf("sandbox: %w", err))
		}
	}
	var oom0, pids0 int64
	if cg != nil {
		oom0, pids0 = cg.events()
	}
	if err := handOver(cmd.Process.Pid, specW, is, userns); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(statR)
	line, _ := br.ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "error "):
		_ = cmd.Wait()
		closeFiles(specW, statR, sockKit)
		return nil, supervisorError(strings.TrimPrefix(line, "error "))
	case line == "ready "+is.Version:
	case strings.HasPrefix(line, "ready"):
		return fail(fmt.Errorf("sandbox: the supervisor %s is version %q, the kit %q: install the %s built with this kit", sup, strings.TrimSpace(strings.TrimPrefix(line, "ready")), is.Version, SupervisorName))
	default:
		return fail(fmt.Errorf("sandbox: the supervisor ended before it was ready (%q)", line))
	}
	if sockKit != nil {
		ln, err := recvListener(sockKit)
		sockKit.Close()
		if err != nil {
			return fail(fmt.Errorf("sandbox: egress listener: %w", err))
		}
		p.listener = ln
	}
	go p.reap(statR, cg, oom0, pids0)
	return p, nil
}

// supFiles are both ends of what the kit and a supervisor talk over: the
// pipe the kit writes the spec to, the pipe the supervisor answers its
// status on, and, for a session with an egress proxy, the socket pair
// the supervisor sends its listener back on.
type supFiles struct {
	specR, specW, statR, statW *os.File
	sockKit, sockChild         *os.File // nil without an egress proxy
}

// openSupFiles opens the pipes, and the socket pair when withSock; on an
// error it closes what it opened.
func openSupFiles(withSock bool) (*supFiles, error) {
	fs := &supFiles{}
	var err error
	fs.specR, fs.specW, err = os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	fs.statR, fs.statW, err = os.Pipe()
	if err != nil {
		closeFiles(fs.specR, fs.specW)
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if withSock {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			closeFiles(fs.specR, fs.specW, fs.statR, fs.statW)
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		fs.sockKit = os.NewFile(uintptr(pair[0]), "listen-kit")
		fs.sockChild = os.NewFile(uintptr(pair[1]), "listen-child")
	}
	return fs, nil
}

// childFiles are the supervisor's descriptors from 3 on: the spec and
// status pipes, the listener's socket, and ctl, which always lands on
// fdControl (a nil entry fills the listener's place when it has none).
func (fs *supFiles) childFiles(ctl *os.File) []*os.File {
	extra := []*os.File{fs.specR, fs.statW}
	if fs.sockChild != nil {
		extra = append(extra, fs.sockChild)
	}
	if ctl != nil {
		if len(extra) < fdListen-2 {
			extra = append(extra, nil)
		}
		extra = append(extra, ctl)
	}
	return extra
}

// handOver writes is to the supervisor pid on specW, after mapping its
// user namespace when userns.
func handOver(pid int, specW *os.File, is *initSpec, userns bool) error {
	if userns {
		if err := mapUserNS(pid); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		// The byte the supervisor waits for before it executes itself
		// again, mapped: white space to the spec's decoder.
		if _, err := specW.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("sandbox: hand over the spec: %w", err)
		}
	}
	// The spec pipe stays open while the process runs: a supervisor that
	// sees it close knows the kit is gone and ends everything it runs.
	if err := json.NewEncoder(specW).Encode(is); err != nil {
		return fmt.Errorf("sandbox: hand over the spec: %w", err)
	}
	return nil
}

// reap waits for the supervisor to end, closes the kit's ends of its
// pipes and its listener, records its exit status and notes whether it
// met a limit of cg (whose events at the start were oom0 and pids0), then
// closes p.done.
func (p *Process) reap(statR *os.File, cg *cgroup, oom0, pids0 int64) {
	defer close(p.done)
	awaitExit(p.cmd.Process.Pid)
	werr := p.cmd.Wait()
	statR.Close()
	p.specW.Close()
	if p.listener != nil {
		p.listener.Close()
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		p.status = StatusOf(ws)
	} else {
		p.err = werr
	}
	p.cg, p.oom0, p.pids0 = cg, oom0, pids0
	p.noteLimit()
}

// argUserNS, as a supervisor's first argument, says it was cloned into a
// user namespace that the kit maps once it runs.
const argUserNS = "userns"

// mapUserNS maps root in the user namespace of the supervisor pid to the
// kit's uid and gid, with setgroups denied. The kit writes the maps once
// the supervisor runs, not before it executes (as os/exec's UidMappings
// would): a kit that made itself non-dumpable (to keep its key out of
// /proc) makes its children so until they execute, and their maps
// writable by root only. The supervisor, which lost its capabilities in
// the namespace when it executed unmapped, executes itself again once
// mapped, as root there.
func mapUserNS(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, w := range []struct{ file, data string }{
		{"setgroups", "deny"},
		{"uid_map", fmt.Sprintf("0 %d 1", os.Geteuid())},
		{"gid_map", fmt.Sprintf("0 %d 1", os.Getegid())},
	} {
		if err := os.WriteFile(dir+w.file, []byte(w.data), 0); err != nil {
			return fmt.Errorf("map the supervisor's user namespace: %w", err)
		}
	}
	return nil
}

// noteLimit names the limit the session hit while the command ran. It
// returns the counters it read (zero without a cgroup).
func (p *Process) noteLimit() (oom, pids int64) {
	// SIGXFSZ is RLIMIT_FSIZE, which the sandbox sets only from
	// limits.disk: a file grew past it, whatever else the cgroup saw.
	if p.status.Signal == syscall.SIGXFSZ {
		p.status.Limit = "disk"
	}
	if p.cg == nil {
		return 0, 0
	}
	oom, pids = p.cg.events()
	switch {
	case p.status.Limit != "":
	case oom > p.oom0:
		p.status.Limit = "memory"
	case pids > p.pids0:
		p.status.Limit = "pids"
	}
	return oom, pids
}

// supervisorError rebuilds a supervisor's "errno message" error line.
func supervisorError(s string) error {
	num, msg, _ := strings.Cut(s, " ")
	if n, err := strconv.Atoi(num); err == nil && n > 0 {
		return fmt.Errorf("sandbox: %s: %w", msg, syscall.Errno(n))
	}
	return fmt.Errorf("sandbox: %s", msg)
}

func recvListener(sock *os.File) (net.Listener, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, 0)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no listener received (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("no listener received (%v)", err)
	}
	f := os.NewFile(uintptr(fds[0]), "egress-listener")
	defer f.Close()
	return net.FileListener(f)
}

// setStdio gives cmd the spec's standard files; one left nil stays a nil
// interface, which os/exec opens as /dev/null.
func setStdio(cmd *exec.Cmd, spec *Spec) {
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin
	}
	if spec.Stdout != nil {
		cmd.Stdout = spec.Stdout
	}
	if spec.Stderr != nil {
		cmd.Stderr = spec.Stderr
	}
}

func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// Pid is the supervisor's pid, in the kit's pid namespace.
func (p *Process) Pid() int {
	if p.sup != nil {
		return p.pid
	}
	return p.cmd.Process.Pid
}

// Done is closed once the process and, in a pid namespace, everything it
// started are gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for Done and returns how the command ended.
func (p *Process) Wait() (ExitStatus, error) {
	<-p.done
	return p.status, p.err
}

// Signal sends sig to every process the command started: through its
// supervisor in a pid namespace, else to its process group (which may
// outlive the command).
func (p *Process) Signal(sig syscall.Signal) error {
	var err error
	if p.sup != nil {
		select {
		case <-p.done:
			return nil
		default:
		}
		return p.sup.signal(p.id, sig)
	}
	if p.pidns {
		select {
		case <-p.done:
			return nil
		default:
		}
		err = p.cmd.Process.Signal(sig)
	} else {
		err = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	if errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// alive reports whether anything the command started still runs.
func (p *Process) alive() bool {
	if p.pidns || p.sup != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	return syscall.Kill(-p.cmd.Process.Pid, 0) == nil
}

// Kill ends the command and everything it started at once.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
}

// Stop sends SIGTERM to everything the command started, waits up to grace
// for all of it to end, then kills what is left; it returns once the
// command is gone.
func (p *Process) Stop(grace time.Duration) {
	if grace > 0 && p.alive() {
		_ = p.Signal(syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for p.alive() && time.Now().Before(deadline) {
			select {
			case <-p.done:
				if p.pidns || p.sup != nil {
					return
				}
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	p.Kill()
	<-p.done
}
