package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A session's supervisor is started once per session, in the session's
// namespaces and cgroup, with its mounts, network, rlimits and privileges
// set up once. Every command of the session is then forked and executed
// by it on request, so that a command costs about a fork/exec instead of a
// re-execution of the kit's binary and a new set of namespaces.
//
// The kit and the supervisor talk over a SOCK_SEQPACKET socket (fdControl),
// one JSON message per packet; a start request carries the command's
// standard files, a start reply the command's pidfd (from which the kit
// learns the command's pid in its own namespace).

const fdControl = 6

// ctlMsg is one message either way on the control socket.
type ctlMsg struct {
	Op   string   `json:"op"` // start, signal, killall (kit); started, error, exit, killed (supervisor); gone (the kit, to itself: the supervisor died)
	ID   uint64   `json:"id"`
	Path string   `json:"path,omitempty"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Stdio says which of stdin, stdout, stderr the request carries, in
	// that order (the others are /dev/null).
	Stdio [3]bool `json:"stdio,omitzero"`
	// Exe: the request carries, after the standard files, the program to
	// run (a sealed memfd: the session helper, helper_linux.go), which
	// the command gets as descriptor 3 and is executed through; Path is
	// then unused.
	Exe bool `json:"exe,omitempty"`
	// Aside: the command runs beside the session's commands, not as one
	// of them: while it runs the session still counts as idle, so the
	// last command's end still ends what the commands left (the aside
	// command too), and its own end ends nothing else.
	Aside bool `json:"aside,omitempty"`
	Sig   int  `json:"sig,omitempty"`
	// Status is the command's wait status (exit).
	Status uint32 `json:"status,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Msg    string `json:"msg,omitempty"`
	// Emptied says, with a command's exit, that the supervisor left
	// nothing else running in the session's pid namespace.
	Emptied bool `json:"emptied,omitempty"`
}

// maxCtlMsg bounds a control message: a command's argv and environment.
const maxCtlMsg = 4 << 20

// hostPid is the pid, in the kit's namespace, of the process a pidfd
// refers to.
func hostPid(pidfd int) int {
	b, err := readSmall("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// sessionSup is the kit's side of a session's supervisor.
type sessionSup struct {
	pid   int    // the supervisor's, in the kit's pid namespace
	kill  func() // kills the supervisor, where close cannot end it
	ctl   *net.UnixConn
	specW *os.File // open while the kit wants the supervisor to live
	pidns bool
	cg    *cgroup
	done  chan struct{} // closed once the supervisor is gone
	// remote: the supervisor is the monitor's child (a front's session),
	// and done closes once its control socket does.
	remote bool

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan ctlReply
	procs   map[uint64]*Process
	gone    bool
	// empty: in a pid namespace, nothing but the supervisor runs there:
	// no command was started since it last said so (with a command's
	// exit), or since it started. killAll has nothing to do then.
	empty bool
	// seen holds the cgroup's counters as read when the namespace was
	// last found empty (at the start, or after the exit that emptied it):
	// while it stays empty they cannot move, and the next command starts
	// from them without reading them again. Set whenever empty is, with
	// a cgroup.
	seen [2]int64
	sent uint64 // start and killall requests written, for tests
}

type ctlReply struct {
	m   ctlMsg
	fds []int
}

// errSupervisorGone is why a command of a session whose supervisor ended
// has no status.
var errSupervisorGone = errors.New("sandbox: the session's supervisor ended")

// startSessionSup starts a session's supervisor (sup) cloned with flags,
// in cg, and waits until it is ready. It returns the egress listener made in its
// network namespace, if is asks for one.
func startSessionSup(sup *supervisor, is *initSpec, flags uintptr, cg *cgroup) (*sessionSup, net.Listener, error) {
	p, ctl, err := spawnSessionSup(sup, is, flags, cg)
	if err != nil {
		return nil, nil, err
	}
	kill := func() { _ = p.cmd.Process.Kill() }
	s, err := newSessionSup(ctl, p.specW, p.pidns, cg, p.cmd.Process.Pid, kill, p.done)
	if err != nil {
		kill()
		p.specW.Close()
		<-p.done
		return nil, nil, err
	}
	go func() {
		<-p.done
		s.ctl.Close()
	}()
	return s, p.listener, nil
}

// spawnSessionSup starts a session's supervisor (sup) cloned with flags,
// in cg, and waits until it is ready. It returns the supervisor and the
// kit's end of its control socket.
func spawnSessionSup(sup *supervisor, is *initSpec, flags uintptr, cg *cgroup) (*Process, *os.File, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %w", err)
	}
	// A start request carries the command's whole argv and environment in
	// one packet: room for maxCtlMsg where the kit may force it (root),
	// else the system's default (about 200 KiB).
	if unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, maxCtlMsg) != nil {
		_ = unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUF, maxCtlMsg)
	}
	ctlKit := os.NewFile(uintptr(pair[0]), "control-kit")
	ctlChild := os.NewFile(uintptr(pair[1]), "control-child")
	defer ctlChild.Close()
	p, err := startSupervisor(sup, is, flags, cg, ctlChild)
	if err != nil {
		ctlKit.Close()
		return nil, nil, err
	}
	return p, ctlKit, nil
}

// newSessionSup serves a ready supervisor's control socket ctl (which it
// takes over). keep is the spec pipe that keeps it alive, pid its pid;
// done is closed once it is gone, or, nil, by the session's side itself
// once ctl closes (a supervisor the monitor started for a front).
func newSessionSup(ctl *os.File, keep *os.File, pidns bool, cg *cgroup, pid int, kill func(), done chan struct{}) (*sessionSup, error) {
	fc, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: control socket: %w", err)
	}
	s := &sessionSup{
		pid: pid, kill: kill, ctl: fc.(*net.UnixConn), specW: keep, pidns: pidns, cg: cg,
		done: done, waiting: map[uint64]chan ctlReply{}, procs: map[uint64]*Process{},
		empty: pidns,
	}
	if done == nil {
		s.done, s.remote = make(chan struct{}), true
	}
	if cg != nil && pidns {
		// Read now, while nothing but the supervisor runs in the
		// namespace: the first command's starting point, read ahead.
		oom, pids := cg.events()
		s.seen = [2]int64{oom, pids}
	}
	go s.read()
	return s, nil
}

// read serves the supervisor's messages until it is gone.
func (s *sessionSup) read() {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := s.ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			break
		}
		fds := rightsIn(oob[:oobn])
		var m ctlMsg
		if json.Unmarshal(buf[:n], &m) != nil {
			closeFds(fds)
			continue
		}
		s.mu.Lock()
		switch m.Op {
		case "started", "error", "killed":
			if ch, ok := s.waiting[m.ID]; ok {
				delete(s.waiting, m.ID)
				ch <- ctlReply{m, fds}
				fds = nil
			}
		case "exit":
			if p, ok := s.procs[m.ID]; ok {
				delete(s.procs, m.ID)
				p.status = StatusOf(syscall.WaitStatus(m.Status))
				oom, pids := p.noteLimit()
				if m.Emptied && len(s.procs) == 0 {
					s.empty = true
					s.seen = [2]int64{oom, pids}
				}
				close(p.done)
			}
		}
		s.mu.Unlock()
		closeFds(fds)
	}
	s.ctl.Close()
	if s.remote {
		s.specW.Close()
		close(s.done)
	}
	<-s.done
	s.mu.Lock()
	s.gone = true
	for id, ch := range s.waiting {
		delete(s.waiting, id)
		ch <- ctlReply{m: ctlMsg{Op: "gone"}}
	}
	for id, p := range s.procs {
		delete(s.procs, id)
		p.err = errSupervisorGone
		p.status = ExitStatus{Code: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL}
		p.noteLimit()
		close(p.done)
	}
	s.mu.Unlock()
}

// start asks the supervisor to run a command and waits until it runs.
func (s *sessionSup) start(path string, args []string, spec *Spec) (*Process, error) {
	m := ctlMsg{Op: "start", Path: path, Args: args, Env: spec.Env, Dir: spec.Dir, Aside: spec.aside}
	if m.Env == nil {
		m.Env = []string{}
	}
	var fds []int
	for i, f := range []*os.File{spec.Stdin, spec.Stdout, spec.Stderr} {
		if f != nil {
			m.Stdio[i] = true
			fds = append(fds, int(f.Fd()))
		}
	}
	if spec.exe != nil {
		m.Exe = true
		fds = append(fds, int(spec.exe.Fd()))
		defer runtime.KeepAlive(spec.exe)
	}
	ch := make(chan ctlReply, 1)
	p := &Process{sup: s, pidns: s.pidns, done: make(chan struct{})}
	s.baseline(p)
	if !s.register(&m, p, ch) {
		return nil, errSupervisorGone
	}
	err := s.send(&m, fds)
	for _, f := range []*os.File{spec.Stdin, spec.Stdout, spec.Stderr} {
		runtime.KeepAlive(f)
	}
	if err != nil {
		s.mu.Lock()
		delete(s.waiting, m.ID)
		delete(s.procs, m.ID)
		s.mu.Unlock()
		return nil, fmt.Errorf("sandbox: ask the session's supervisor to start %s: %w", path, err)
	}
	r := <-ch
	if r.m.Op != "started" {
		closeFds(r.fds)
		s.mu.Lock()
		delete(s.procs, m.ID)
		s.mu.Unlock()
		if r.m.Op == "gone" {
			// It died with the request unanswered: the caller starts
			// the command with the next supervisor.
			return nil, errSupervisorGone
		}
		if r.m.Errno > 0 {
			return nil, fmt.Errorf("sandbox: %s: %w", r.m.Msg, syscall.Errno(r.m.Errno))
		}
		return nil, fmt.Errorf("sandbox: %s", r.m.Msg)
	}
	for _, fd := range r.fds {
		if p.pid == 0 {
			p.pid = hostPid(fd)
		}
		unix.Close(fd)
	}
	return p, nil
}

// baseline gives p the cgroup's events as the command starts, so that
// its end can tell whether it met a limit: those in seen while the
// namespace is known empty, else read now.
func (s *sessionSup) baseline(p *Process) {
	if s.cg == nil {
		return
	}
	p.cg = s.cg
	s.mu.Lock()
	cached := s.empty && len(s.procs) == 0
	p.oom0, p.pids0 = s.seen[0], s.seen[1]
	s.mu.Unlock()
	if !cached {
		p.oom0, p.pids0 = s.cg.events()
	}
}

// register gives m and p the next request id and records them, with ch
// for the reply. It reports false when the supervisor is gone.
func (s *sessionSup) register(m *ctlMsg, p *Process, ch chan ctlReply) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return false
	}
	s.next++
	m.ID = s.next
	p.id = m.ID
	s.waiting[m.ID] = ch
	s.procs[m.ID] = p
	s.empty = false
	s.sent++
	return true
}

// send writes m, with fds as its descriptors, on the control socket. A
// write the supervisor's end refused wraps errSupervisorGone.
func (s *sessionSup) send(m *ctlMsg, fds []int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxCtlMsg {
		return fmt.Errorf("the command's arguments and environment take %d bytes, more than %d", len(b), maxCtlMsg)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err = s.ctl.WriteMsgUnix(b, oob, nil)
	if err != nil && (errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || s.isGone()) {
		err = fmt.Errorf("%w: %w", errSupervisorGone, err)
	}
	return err
}

// killAll asks a supervisor in a pid namespace to kill every process of
// the session but itself, and waits until it did. It reports false when
// the supervisor could not.
func (s *sessionSup) killAll() bool {
	if !s.pidns {
		return false
	}
	ch := make(chan ctlReply, 1)
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return false
	}
	if s.empty && len(s.procs) == 0 {
		// The last command's exit said the namespace was emptied, and
		// none started since: no round trip.
		s.mu.Unlock()
		return true
	}
	s.sent++
	s.next++
	id := s.next
	s.waiting[id] = ch
	s.mu.Unlock()
	b, _ := json.Marshal(&ctlMsg{Op: "killall", ID: id})
	if _, err := s.ctl.Write(b); err != nil {
		s.mu.Lock()
		delete(s.waiting, id)
		s.mu.Unlock()
		return false
	}
	select {
	case r := <-ch:
		return r.m.Op == "killed"
	case <-time.After(10 * time.Second):
		return false
	}
}

// signal asks the supervisor to signal a command's process group.
func (s *sessionSup) signal(id uint64, sig syscall.Signal) error {
	b, _ := json.Marshal(&ctlMsg{Op: "signal", ID: id, Sig: int(sig)})
	if _, err := s.ctl.Write(b); err != nil && !s.isGone() {
		return fmt.Errorf("sandbox: signal through the session's supervisor: %w", err)
	}
	return nil
}

func (s *sessionSup) isGone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// close ends the supervisor and everything it runs, and waits (bounded)
// until it is gone.
func (s *sessionSup) close() {
	s.specW.Close()
	s.ctl.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.kill()
		<-s.done
	}
}
