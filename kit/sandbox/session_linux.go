package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Session is one session's sandbox: its uid, its directories, its
// cgroup. Every process it starts runs with them.
type Session struct {
	sb   *Sandbox
	id   string
	dirs []string
	// held are the directories OpenSession made (ownsDirs): removed
	// with the session.
	held     sessionDirs
	ownsDirs bool
	tmp      string // the session's private TMPDIR (Config.TmpRoot), or ""
	uid      int    // -1: the kit's
	slot     int
	cg       *cgroup

	// OnListener, when set before the first Start, receives the egress
	// proxy listener made inside each new network namespace. Without it a
	// sandboxed process has loopback only.
	OnListener func(net.Listener)
	// ProxyAddr is where that listener listens inside the namespace.
	// Default DefaultProxyAddr.
	ProxyAddr string
	// ConfineNet, set before the first Start, asks that where no network
	// namespace confines the session its processes reach the network only
	// through EgressPort: TCP connects restricted by Landlock (ABI 4 and
	// later) and UDP, raw and packet sockets refused by seccomp. The kit
	// sets it when the box has an egress proxy.
	ConfineNet bool
	// EgressPort is the loopback TCP port of the session's egress proxy
	// where no network namespace holds one (the only port ConfineNet
	// lets a process connect to); 0 is none.
	EgressPort int

	mu     sync.Mutex
	closed bool
	procs  map[*Process]struct{}
	sup    *sessionSup // the session's supervisor, once started

	helperMu sync.Mutex
	helper   *Helper // the session helper, once asked for (helper_linux.go)

	pauseMu sync.Mutex // orders Pause and Wake (pause_linux.go)
	paused  bool

	keepDirs bool   // Release: Close leaves the directories
	supNet   [2]int // ConfineNet and EgressPort as its supervisor was made with
}

// Start runs spec in the session's sandbox. A nil session starts it in a
// Plain one. Every command of a session, with namespaces or without,
// starts through the session's supervisor (started with the first
// command, or ahead of it by Warm), which forks and executes it: a command
// costs a fork/exec, never a re-execution of the kit's binary.
func (ss *Session) Start(spec Spec) (*Process, error) {
	if ss == nil {
		ss = Plain()
	}
	path, err := lookPath(spec.Path, spec.Env)
	if err != nil {
		return nil, err
	}
	if ss.sb.plain {
		return ss.startPlain(path, spec)
	}
	if err := ss.woken(); err != nil {
		return nil, err
	}
	return ss.startVia(path, spec)
}

// startVia starts spec (path, looked up) through the session's
// supervisor.
func (ss *Session) startVia(path string, spec Spec) (*Process, error) {
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
	}
	if ss.tmp != "" {
		spec.Env = withEnv(spec.Env, "TMPDIR", ss.tmp)
	}
	sp, err := ss.supervisor()
	if err != nil {
		return nil, err
	}
	p, err := sp.start(path, args, &spec)
	if errors.Is(err, errSupervisorGone) {
		// It was ending (killed with the session's cgroup): once it is
		// gone, the next one starts the command.
		select {
		case <-sp.done:
		case <-time.After(5 * time.Second):
		}
		if sp, err = ss.supervisor(); err == nil {
			p, err = sp.start(path, args, &spec)
		}
	}
	if err != nil {
		return nil, err
	}
	p.ss = ss
	ss.track(p)
	return p, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withEnv is env with name set to value, in place of any earlier value.
func withEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// initSpec is what a supervisor of the session sets up, and the flags it
// is cloned with; home is the session user's home directory.
func (ss *Session) initSpec(home string) (*initSpec, uintptr) {
	sb := ss.sb
	is := &initSpec{
		UID: ss.uid, GID: ss.uid,
		Grace:    sb.cfg.Grace,
		DropCaps: true,
		Rlimits: []initRlimit{
			{Resource: syscall.RLIMIT_NOFILE, Cur: uint64(sb.cfg.Limits.Files), Max: uint64(sb.cfg.Limits.Files)},
			{Resource: unix.RLIMIT_CORE},
		},
	}
	if ss.uid >= 0 {
		nproc := uint64(sb.cfg.Limits.Pids)
		if sb.cg != nil {
			// The cgroup's pids.max is the limit, and a fork it refuses is
			// counted, so the status names it. RLIMIT_NPROC, which counts
			// the uid's tasks anywhere, is only the backstop then: set at
			// the limit it could refuse first, unnamed.
			nproc += max(16, nproc/4)
		}
		is.Rlimits = append(is.Rlimits, initRlimit{Resource: unix.RLIMIT_NPROC, Cur: nproc, Max: nproc})
	}
	if d := sb.cfg.Limits.Disk; d > 0 {
		is.Rlimits = append(is.Rlimits, initRlimit{Resource: unix.RLIMIT_FSIZE, Cur: uint64(d), Max: uint64(d)})
	}
	flags := sb.cloneMask
	if flags&syscall.CLONE_NEWNS != 0 {
		tmp := sb.cfg.Limits.tmpSize()
		is.Mount = &mountSpec{
			Hide:     sb.cfg.Hide,
			Bind:     ss.dirs,
			Expose:   sb.cfg.Expose,
			Tmp:      []tmpMount{{Path: "/tmp", Size: tmp}, {Path: "/dev/shm", Size: tmp}},
			ReadOnly: true,
			Proc:     flags&syscall.CLONE_NEWPID != 0,
			Dev:      true,
		}
		if ss.uid >= 0 {
			is.Mount.User = &userEntry{UID: ss.uid, Home: home}
		}
	}
	if flags&syscall.CLONE_NEWNET != 0 {
		is.Net = &netSpec{}
		if ss.OnListener != nil {
			is.Net.ProxyAddr = ss.ProxyAddr
			if is.Net.ProxyAddr == "" {
				is.Net.ProxyAddr = DefaultProxyAddr
			}
		}
	}
	// The network is confined to the egress proxy by a namespace that
	// holds its listener, or (ConfineNet) by Landlock and seccomp.
	netns := flags&syscall.CLONE_NEWNET != 0
	confined := ss.ConfineNet || (netns && ss.OnListener != nil)
	if sb.seccomp {
		is.Seccomp = &seccompOptions{Confined: confined}
	}
	if sb.landlock > 0 {
		rw := slices.Clone(ss.dirs)
		if ss.tmp != "" {
			rw = append(rw, ss.tmp)
		}
		is.Landlock = &landlockSpec{
			ABI: sb.landlock, Hide: sb.cfg.Hide, RW: rw, RO: sb.cfg.Expose,
			PrivateTmp: flags&syscall.CLONE_NEWNS != 0,
			Net:        ss.ConfineNet && !netns && sb.landlock >= 4,
			EgressPort: ss.EgressPort,
		}
	}
	if sb.userns {
		flags |= syscall.CLONE_NEWUSER
	}
	return is, flags
}

// Warm starts the session's supervisor now, in its namespaces and cgroup,
// so that its first command costs only a fork/exec. Set OnListener first.
// A Plain session has no supervisor to start and it does nothing.
func (ss *Session) Warm() error {
	if ss == nil || ss.sb.plain {
		return nil
	}
	_, err := ss.supervisor()
	return err
}

// Lost is closed when the session's supervisor ends before the session
// does (killed, out of memory): a warm session that lost it is no longer
// warm. Nil (never closed) where the session has no supervisor yet.
func (ss *Session) Lost() <-chan struct{} {
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.sup == nil {
		return nil
	}
	return ss.sup.done
}

// supervisor returns the session's supervisor, starting one when there is
// none or the last one ended.
func (ss *Session) supervisor() (*sessionSup, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, errors.New("sandbox: the session has ended")
	}
	if ss.sup != nil {
		select {
		case <-ss.sup.done:
		default:
			if ss.supNet != [2]int{boolInt(ss.ConfineNet), ss.EgressPort} {
				// Its Landlock domain and filter were made without them:
				// refused rather than run unconfined.
				return nil, errors.New("sandbox: ConfineNet or EgressPort changed after the session's supervisor started: set them before Warm and the first Start")
			}
			return ss.sup, nil
		}
	}
	var sp *sessionSup
	var ln net.Listener
	var err error
	if ss.sb.mon != nil {
		sp, ln, err = ss.sb.mon.supervise(ss)
	} else {
		sp, ln, err = ss.startSup()
	}
	if err != nil {
		return nil, err
	}
	if ln != nil {
		if ss.OnListener != nil {
			ss.OnListener(ln)
		} else {
			ln.Close()
		}
	}
	ss.sup = sp
	ss.supNet = [2]int{boolInt(ss.ConfineNet), ss.EgressPort}
	return sp, nil
}

// startSup starts the session's supervisor as this process's child.
func (ss *Session) startSup() (*sessionSup, net.Listener, error) {
	is, flags, err := ss.prepareSup()
	if err != nil {
		return nil, nil, err
	}
	return startSessionSup(ss.sb.program(), is, flags, ss.cg)
}

// prepareSup makes the session's cgroup, the first time, and the spec of
// its next supervisor.
func (ss *Session) prepareSup() (*initSpec, uintptr, error) {
	home := "/"
	if len(ss.dirs) > 0 {
		home = ss.dirs[0]
	}
	if ss.sb.cg != nil && ss.cg == nil {
		cg, err := ss.sb.cg.create(ss.id, ss.sb.cfg.Limits)
		if err != nil {
			return nil, 0, fmt.Errorf("sandbox: %w", err)
		}
		ss.cg = cg
	}
	is, flags := ss.initSpec(home)
	is.Session = true
	return is, flags, nil
}

// KillAll kills every process of the session and waits until they are
// gone (bounded). Processes that left their process group, or started a
// session of their own, are found through the session's cgroup or uid.
func (ss *Session) KillAll() {
	if ss == nil {
		return
	}
	// Frozen, its processes would not die, nor its supervisor answer.
	if err := ss.Wake(); err != nil {
		ss.sb.log.Warn("sandbox: wake the session to end its processes", "err", err)
	}
	ss.mu.Lock()
	procs := make([]*Process, 0, len(ss.procs))
	for p := range ss.procs {
		procs = append(procs, p)
	}
	ss.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
	// A supervisor in a pid namespace ends everything of the session but
	// itself, which stays for the next command; else the cgroup (with the
	// supervisor, started anew by the next command) does.
	ss.mu.Lock()
	sp, cg := ss.sup, ss.cg
	ss.mu.Unlock()
	switch {
	case sp != nil && sp.killAll():
	case ss.sb.mon != nil:
		// The monitor kills through the cgroup or the uid.
		if err := ss.sb.mon.simple(opKillAll, ss.id); err != nil {
			ss.sb.log.Warn("sandbox: kill the session's processes", "err", err)
		}
	case cg != nil:
		cg.kill(5 * time.Second)
	}
	if ss.slot >= 0 && ss.sb.uidOnly() {
		killUID(ss.uid)
	}
	for _, p := range procs {
		<-p.done
	}
}

// Release is Close that keeps the session's directories, for a later
// OpenSession of the same id (a persistent session, across a restart of
// the kit): its processes, cgroup, temporary directory and uid go; its
// work, input and output directories stay, with what they hold.
func (ss *Session) Release() error {
	ss.mu.Lock()
	ss.keepDirs = true
	ss.mu.Unlock()
	return ss.Close()
}

// Close kills every process of the session, removes its cgroup, its
// temporary directory and the directories OpenSession made, and frees its
// uid.
func (ss *Session) Close() error {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil
	}
	ss.closed = true
	keep := ss.keepDirs
	ss.mu.Unlock()
	ss.helperMu.Lock()
	if ss.helper != nil {
		ss.helper.close()
	}
	ss.helperMu.Unlock()
	ss.KillAll()
	ss.mu.Lock()
	sp, cg := ss.sup, ss.cg
	ss.mu.Unlock()
	if sp != nil {
		sp.close()
	}
	if ss.sb.mon != nil {
		// Processes, cgroup, directories, uid: the monitor's.
		_, _, err := ss.sb.mon.call(monRequest{Op: opClose, Session: ss.id, Keep: keep})
		return err
	}
	if cg != nil {
		cg.remove()
	}
	if ss.tmp != "" {
		if err := os.RemoveAll(filepath.Join(fdPath(ss.sb.tmpRoot), ss.id)); err != nil {
			ss.sb.log.Warn("sandbox: remove the session's temporary directory", "dir", ss.tmp, "err", err)
		}
	}
	if ss.ownsDirs && !keep {
		if err := ss.sb.removeDirs(ss.id); err != nil {
			ss.sb.log.Warn(err.Error())
		}
	}
	ss.held.close()
	if ss.slot >= 0 {
		ss.sb.mu.Lock()
		ss.sb.free = append(ss.sb.free, ss.slot)
		ss.sb.mu.Unlock()
	}
	return nil
}

// killUID kills every process running under uid, for up to a second.
func killUID(uid int) {
	deadline := time.Now().Add(time.Second)
	for {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat("/proc/"+e.Name(), &st) != nil || int(st.Uid) != uid {
				continue
			}
			found = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if !found || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startPlain starts spec as the kit would without a sandbox: in a process
// group of its own, nothing else.
func (ss *Session) startPlain(path string, spec Spec) (*Process, error) {
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
	}
	cmd := &exec.Cmd{Path: path, Args: args, Dir: spec.Dir, Env: spec.Env,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	setStdio(cmd, &spec)
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	if err := startOnOwnThread(cmd); err != nil {
		return nil, fmt.Errorf("sandbox: start %s: %w", path, err)
	}
	p := &Process{cmd: cmd, ss: ss, done: make(chan struct{})}
	ss.track(p)
	go func() {
		defer close(p.done)
		awaitExit(cmd.Process.Pid)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.status = StatusOf(ws)
		} else {
			p.err = err
		}
	}()
	return p, nil
}

// track counts p among the session's processes until it is done.
func (ss *Session) track(p *Process) {
	ss.mu.Lock()
	ss.procs[p] = struct{}{}
	ss.mu.Unlock()
	go func() {
		<-p.done
		ss.mu.Lock()
		delete(ss.procs, p)
		ss.mu.Unlock()
	}()
}

// Plain returns a session with no layer at all: processes run as the kit
// would run them itself, in a process group of their own. Agents use it when the kit gives them no
// sandbox (Go programs that embed an agent without a kit, tests).
//
// Not even the seccomp filter: a plain session has no supervisor to
// install it, no no_new_privs (which a filter needs without
// CAP_SYS_ADMIN), and a program that embeds an agent without a kit may
// run tools that need what the filter refuses (a container runtime, a
// debugger).
func Plain() *Session {
	sb := &Sandbox{plain: true, tmpRoot: -1, cfg: Config{Off: true, Grace: DefaultGrace, Limits: Limits{Pids: DefaultPids, Files: DefaultFiles}}}
	sb.report = Report{Inactive: map[string]string{LayerPrivileges: "a plain session", LayerSeccomp: "a plain session", LayerLandlock: "a plain session"}}
	return &Session{sb: sb, uid: -1, slot: -1, procs: map[*Process]struct{}{}}
}

// SupervisorPid is the pid of the session's supervisor, or 0 when it has
// none running.
func (ss *Session) SupervisorPid() int {
	if ss == nil {
		return 0
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.sup == nil || ss.sup.isGone() {
		return 0
	}
	return ss.sup.pid
}
