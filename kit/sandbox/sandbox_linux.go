package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox makes sessions' sandboxes with the layers this platform allows.
type Sandbox struct {
	cfg    Config
	log    *slog.Logger
	report Report

	plain     bool    // Plain: no layer at all, not even no_new_privs
	root      bool    // the kit runs as root: users layer possible
	users     bool    // a uid per session
	userns    bool    // a user namespace maps the kit's uid to root inside
	cloneMask uintptr // the namespaces each process is cloned into
	cg        *cgroups

	mu   sync.Mutex
	free []int // free uid slots, as a stack
	next int   // the next never-used slot
}

// New checks which layers cfg asks for this platform allows, and says so
// in its Report. It fails only when a layer it needs to set up (the hidden
// directories' modes) cannot be.
func New(cfg Config, log *slog.Logger) (*Sandbox, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.UIDBase <= 0 {
		cfg.UIDBase = DefaultUIDBase
	}
	if cfg.UIDCount <= 0 {
		cfg.UIDCount = DefaultUIDCount
	}
	if cfg.Limits.Pids <= 0 {
		cfg.Limits.Pids = DefaultPids
	}
	if cfg.Limits.Files <= 0 {
		cfg.Limits.Files = DefaultFiles
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	sb := &Sandbox{cfg: cfg, log: log, root: os.Geteuid() == 0}
	inactive := map[string]string{}
	off := func(layer, why string) { inactive[layer] = why }

	switch {
	case cfg.Off:
		for _, l := range []string{LayerUsers, LayerMount, LayerPID, LayerNetwork, LayerCgroup} {
			off(l, "[sandbox] is turned off in the manifest")
		}
	default:
		sb.probeNamespaces(off)
		switch {
		case cfg.NoUsers:
			off(LayerUsers, "turned off in the manifest")
		case sb.root:
			sb.users = true
		case sb.userns:
			off(LayerUsers, "the kit does not run as root: every session runs as the kit's uid, mapped to root without capabilities in a user namespace")
		default:
			off(LayerUsers, "the kit does not run as root and user namespaces are not allowed: agents run as the kit's uid")
		}
		switch {
		case cfg.NoCgroup:
			off(LayerCgroup, "turned off in the manifest")
		case !sb.root:
			off(LayerCgroup, "the kit does not run as root")
		default:
			cg, err := findCgroups()
			if err != nil {
				off(LayerCgroup, err.Error())
			} else {
				sb.cg = cg
			}
		}
	}
	// Without a mount namespace, hidden directories are hidden by their
	// modes (root owns them); agents under the kit's own uid would still
	// reach them, which the report says.
	if sb.root {
		for _, p := range cfg.Hide {
			if err := os.Chmod(p, 0o711); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("sandbox: protect %s: %w", p, err)
			}
		}
	}

	var active []string
	if sb.users {
		active = append(active, LayerUsers)
	}
	if sb.userns {
		active = append(active, LayerUserNS)
	}
	active = append(active, LayerPrivileges)
	for _, l := range []struct {
		name string
		flag uintptr
	}{{LayerMount, syscall.CLONE_NEWNS}, {LayerPID, syscall.CLONE_NEWPID}, {LayerNetwork, syscall.CLONE_NEWNET}} {
		if sb.cloneMask&l.flag != 0 {
			active = append(active, l.name)
		}
	}
	if sb.cg != nil {
		active = append(active, LayerCgroup)
	}
	sb.report = Report{Active: active, Limits: ReportLimits{Pids: cfg.Limits.Pids, Files: cfg.Limits.Files, Disk: cfg.Limits.Disk}}
	if len(inactive) > 0 {
		sb.report.Inactive = inactive
	}
	if sb.users {
		sb.report.UIDs = fmt.Sprintf("%d-%d", cfg.UIDBase, cfg.UIDBase+cfg.UIDCount-1)
	}
	if sb.cg != nil {
		sb.report.Cgroup = sb.cg.version
		sb.report.Limits.Memory = cfg.Limits.Memory
		sb.report.Limits.CPU = cfg.Limits.CPU
	}
	return sb, nil
}

// probeNamespaces starts a supervisor in each namespace the config asks
// for and keeps those that work.
func (sb *Sandbox) probeNamespaces(off func(layer, why string)) {
	want := []struct {
		name string
		flag uintptr
		no   bool
	}{
		{LayerMount, syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC, sb.cfg.NoMount},
		{LayerPID, syscall.CLONE_NEWPID, sb.cfg.NoPID},
		{LayerNetwork, syscall.CLONE_NEWNET, sb.cfg.NoNetwork},
	}
	if !sb.root {
		if err := sb.probe(syscall.CLONE_NEWUSER, true); err != nil {
			for _, w := range want {
				off(w.name, "the kit does not run as root and user namespaces are not allowed ("+err.Error()+")")
			}
			return
		}
		sb.userns = true
	}
	var mask uintptr
	for _, w := range want {
		if w.no {
			off(w.name, "turned off in the manifest")
			continue
		}
		mask |= w.flag
	}
	if mask == 0 {
		return
	}
	// The usual answer first: every namespace at once, one supervisor
	// started at boot instead of one a namespace.
	together := sb.probe(mask, sb.userns)
	if together == nil {
		sb.cloneMask = mask
		return
	}
	// Something failed: find what, each alone, at the same time.
	errs := make([]error, len(want))
	var wg sync.WaitGroup
	for i, w := range want {
		if mask&w.flag == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sb.probe(w.flag, sb.userns)
		}()
	}
	wg.Wait()
	alone := 0
	for i, w := range want {
		if mask&w.flag == 0 {
			continue
		}
		if errs[i] != nil {
			off(w.name, errs[i].Error())
			continue
		}
		alone++
	}
	if alone == 0 {
		return
	}
	// Some work alone: keep them if they work together.
	var ok uintptr
	for i, w := range want {
		if mask&w.flag != 0 && errs[i] == nil {
			ok |= w.flag
		}
	}
	if err := sb.probe(ok, sb.userns); err != nil {
		for _, w := range want {
			if ok&w.flag != 0 {
				off(w.name, "works alone but not with the other namespaces: "+err.Error())
			}
		}
		return
	}
	sb.cloneMask = ok
}

// probe runs a supervisor that sets up what flags need, then exits.
func (sb *Sandbox) probe(flags uintptr, userns bool) error {
	spec := initSpec{UID: -1, GID: -1, Probe: true, DropCaps: true}
	if flags&syscall.CLONE_NEWNS != 0 {
		spec.Mount = &mountSpec{ReadOnly: true, Tmp: []tmpMount{{Path: "/tmp", Size: 1 << 20}}}
		if flags&syscall.CLONE_NEWPID != 0 {
			spec.Mount.Proc = true
		}
	}
	if flags&syscall.CLONE_NEWNET != 0 {
		spec.Net = &netSpec{}
	}
	if userns {
		flags |= syscall.CLONE_NEWUSER
	}
	p, err := startSupervisor(&spec, flags, nil, nil)
	if err != nil {
		return err
	}
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if st.Code != 0 {
		return fmt.Errorf("probe: %s", st)
	}
	return nil
}

// Report says which layers are in force.
func (sb *Sandbox) Report() Report { return sb.report }

// uidOnly reports whether a session's uid is the only handle on all its
// processes: no pid namespace ends them and no cgroup finds them.
func (sb *Sandbox) uidOnly() bool {
	return sb.users && sb.cg == nil && sb.cloneMask&syscall.CLONE_NEWPID == 0
}

// Session is one session's sandbox: its uid, its directories, its
// cgroup. Every process it starts runs with them.
type Session struct {
	sb   *Sandbox
	id   string
	dirs []string
	uid  int // -1: the kit's
	slot int
	cg   *cgroup

	// OnListener, when set before the first Start, receives the egress
	// proxy listener made inside each new network namespace. Without it a
	// sandboxed process has loopback only.
	OnListener func(net.Listener)
	// ProxyAddr is where that listener listens inside the namespace.
	// Default DefaultProxyAddr.
	ProxyAddr string

	mu     sync.Mutex
	closed bool
	procs  map[*Process]struct{}
	sup    *sessionSup // the session's supervisor, once started
}

// Open makes the sandbox of session id, whose writable directories are
// dirs (which must exist): they are given to the session's uid, mode 0700.
func (sb *Sandbox) Open(id string, dirs []string) (*Session, error) {
	ss := &Session{sb: sb, id: id, dirs: dirs, uid: -1, slot: -1, procs: map[*Process]struct{}{}}
	switch {
	case sb.users && sb.cfg.SharedDirs:
		ss.uid = sb.cfg.UIDBase
	case sb.users:
		slot, err := sb.takeSlot()
		if err != nil {
			return nil, err
		}
		ss.slot, ss.uid = slot, sb.cfg.UIDBase+slot
		// Where nothing but the uid holds a session's processes, a uid
		// that a dead session left processes under is not handed out
		// dirty: whatever still runs under it goes first.
		if sb.uidOnly() {
			killUID(ss.uid)
		}
	}
	if ss.uid >= 0 {
		for _, d := range dirs {
			if err := os.Chown(d, ss.uid, ss.uid); err != nil {
				ss.Close()
				return nil, fmt.Errorf("sandbox: give %s to the session: %w", d, err)
			}
		}
	}
	for _, d := range dirs {
		if err := os.Chmod(d, 0o700); err != nil {
			ss.Close()
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	if sb.cg != nil {
		cg, err := sb.cg.create(id, sb.cfg.Limits)
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		ss.cg = cg
	}
	return ss, nil
}

func (sb *Sandbox) takeSlot() (int, error) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if n := len(sb.free); n > 0 {
		s := sb.free[n-1]
		sb.free = sb.free[:n-1]
		return s, nil
	}
	if sb.next >= sb.cfg.UIDCount {
		return 0, fmt.Errorf("sandbox: all %d session uids are in use (sandbox.uid_count)", sb.cfg.UIDCount)
	}
	sb.next++
	return sb.next - 1, nil
}

// UID is the session's uid, or -1 when it runs as the kit's.
func (ss *Session) UID() int {
	if ss == nil {
		return -1
	}
	return ss.uid
}

// Chown gives path (not following a last symbolic link) to the session's
// uid; without a uid of its own it does nothing.
func (ss *Session) Chown(path string) error {
	if ss == nil || ss.uid < 0 {
		return nil
	}
	return os.Lchown(path, ss.uid, ss.uid)
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
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
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

// initSpec is what a supervisor of the session sets up, and the flags it
// is cloned with; home is the session user's home directory.
func (ss *Session) initSpec(home string) (*initSpec, uintptr, func(net.Listener)) {
	sb := ss.sb
	is := &initSpec{
		UID: ss.uid, GID: ss.uid,
		Grace:    sb.cfg.Grace,
		DropCaps: sb.root || sb.userns,
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
		tmp := sb.cfg.Limits.Disk
		if tmp <= 0 {
			tmp = 1 << 30
		}
		is.Mount = &mountSpec{
			Hide:     sb.cfg.Hide,
			Bind:     ss.dirs,
			Expose:   sb.cfg.Expose,
			Tmp:      []tmpMount{{Path: "/tmp", Size: tmp}, {Path: "/dev/shm", Size: tmp}},
			ReadOnly: true,
			Proc:     flags&syscall.CLONE_NEWPID != 0,
		}
		if ss.uid >= 0 {
			is.Mount.User = &userEntry{UID: ss.uid, Home: home}
		}
	}
	var onListener func(net.Listener)
	if flags&syscall.CLONE_NEWNET != 0 {
		is.Net = &netSpec{}
		if ss.OnListener != nil {
			is.Net.ProxyAddr = ss.ProxyAddr
			if is.Net.ProxyAddr == "" {
				is.Net.ProxyAddr = DefaultProxyAddr
			}
			onListener = ss.OnListener
		}
	}
	if sb.userns {
		flags |= syscall.CLONE_NEWUSER
	}
	return is, flags, onListener
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
			return ss.sup, nil
		}
	}
	home := "/"
	if len(ss.dirs) > 0 {
		home = ss.dirs[0]
	}
	is, flags, onListener := ss.initSpec(home)
	is.Session = true
	sp, ln, err := startSessionSup(is, flags, ss.cg)
	if err != nil {
		return nil, err
	}
	if ln != nil {
		if onListener != nil {
			onListener(ln)
		} else {
			ln.Close()
		}
	}
	ss.sup = sp
	return sp, nil
}

// KillAll kills every process of the session and waits until they are
// gone (bounded). Processes that left their process group, or started a
// session of their own, are found through the session's cgroup or uid.
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
	}
	// A supervisor in a pid namespace ends everything of the session but
	// itself, which stays for the next command; else the cgroup (with the
	// supervisor, started anew by the next command) does.
	ss.mu.Lock()
	sp := ss.sup
	ss.mu.Unlock()
	if (sp == nil || !sp.killAll()) && ss.cg != nil {
		ss.cg.kill(5 * time.Second)
	}
	if ss.slot >= 0 && ss.sb.uidOnly() {
		killUID(ss.uid)
	}
	for _, p := range procs {
		<-p.done
	}
}

// Close kills every process of the session, removes its cgroup and frees
// its uid. The kit removes the directories.
func (ss *Session) Close() error {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil
	}
	ss.closed = true
	ss.mu.Unlock()
	ss.KillAll()
	ss.mu.Lock()
	sp := ss.sup
	ss.mu.Unlock()
	if sp != nil {
		sp.close()
	}
	if ss.cg != nil {
		ss.cg.remove()
	}
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

// startSupervisor starts a supervisor cloned with flags, puts it in cg,
// hands it is (a probe's or a session's) and waits until it is ready. A
// session's supervisor gets ctl, its control socket, as fdControl.
func startSupervisor(is *initSpec, flags uintptr, cg *cgroup, ctl *os.File) (*Process, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		closeFiles(specR, specW)
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	extra := []*os.File{specR, statW}
	var sockKit *os.File
	if is.Net != nil && is.Net.ProxyAddr != "" {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			closeFiles(specR, specW, statR, statW)
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		sockKit = os.NewFile(uintptr(pair[0]), "listen-kit")
		sockChild := os.NewFile(uintptr(pair[1]), "listen-child")
		defer sockChild.Close()
		extra = append(extra, sockChild)
	}
	if ctl != nil {
		if len(extra) < fdListen-2 {
			extra = append(extra, nil)
		}
		extra = append(extra, ctl)
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{InitName},
		// Nothing of the kit's environment: only what makes a race-enabled
		// build exit at once instead of a second later.
		Env:        []string{"GORACE=atexit_sleep_ms=0"},
		Dir:        "/",
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: flags,
			Setpgid:    true,
		},
	}
	if flags&syscall.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	err = startOnOwnThread(cmd)
	closeFiles(specR, statW)
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
	// The spec pipe stays open while the process runs: a supervisor that
	// sees it close knows the kit is gone and ends everything it runs.
	if err := json.NewEncoder(specW).Encode(is); err != nil {
		return fail(fmt.Errorf("sandbox: hand over the spec: %w", err))
	}
	br := bufio.NewReader(statR)
	line, _ := br.ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "error "):
		_ = cmd.Wait()
		closeFiles(specW, statR, sockKit)
		return nil, supervisorError(strings.TrimPrefix(line, "error "))
	case line == "ready":
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
	go func() {
		defer close(p.done)
		awaitExit(cmd.Process.Pid)
		werr := cmd.Wait()
		statR.Close()
		specW.Close()
		if p.listener != nil {
			p.listener.Close()
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.status = statusOf(ws)
		} else {
			p.err = werr
		}
		p.cg, p.oom0, p.pids0 = cg, oom0, pids0
		p.noteLimit()
	}()
	return p, nil
}

// noteLimit names the limit the session hit while the command ran.
func (p *Process) noteLimit() {
	if p.cg == nil {
		return
	}
	oom, pids := p.cg.events()
	switch {
	case oom > p.oom0:
		p.status.Limit = "memory"
	case pids > p.pids0:
		p.status.Limit = "pids"
	}
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
			p.status = statusOf(ws)
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
func Plain() *Session {
	sb := &Sandbox{plain: true, cfg: Config{Off: true, Grace: DefaultGrace, Limits: Limits{Pids: DefaultPids, Files: DefaultFiles}}}
	sb.report = Report{Inactive: map[string]string{LayerPrivileges: "a plain session"}}
	return &Session{sb: sb, uid: -1, slot: -1, procs: map[*Process]struct{}{}}
}

// Reclaim removes what a session of an earlier kit process left in the
// sandbox (the kit was killed before it closed the session): its cgroup,
// after killing whatever still runs in it. It reports whether there was
// one. Call it at boot, for the ids of sessions the kit knows were open,
// never for a live session. Other kits' cgroups share the parent, so
// reclaiming goes by id only.
func (sb *Sandbox) Reclaim(id string) bool {
	if sb.cg == nil || id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return false
	}
	c := &cgroup{cg: sb.cg, dirs: map[string]string{}}
	for ctl, parent := range sb.cg.parents {
		dir := filepath.Join(parent, id)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			c.dirs[ctl] = dir
		}
	}
	if len(c.dirs) == 0 {
		return false
	}
	if c.dirs[""] != "" || c.dirs["pids"] != "" {
		c.kill(2 * time.Second)
	}
	c.remove()
	return true
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
	return ss.sup.cmd.Process.Pid
}
