package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sessionLoop serves start and signal requests until the kit closes the
// control socket or the spec pipe. It runs on the supervisor's locked main
// thread, whose no_new_privs and empty bounding set every command
// inherits. It calls ready once it waits for the first request, with
// everything a command needs in place: the kit counts a session as warm
// from then on, so its first command costs what a later one does.
func sessionLoop(spec *initSpec, kitGone <-chan struct{}, ready func()) int {
	s := &sessionSupervisor{
		spec:  spec,
		cmds:  map[int]uint64{},
		aside: map[int]bool{},
		pidns: os.Getpid() == 1,
		wake:  make(chan struct{}, 1),
	}
	// Commands make their files group-writable: a session's directories
	// are group-owned by the kit user where the kit's privileges are
	// separated (their setgid bit passes the group on), so that the kit
	// can write what the agent asks it to through ACP's fs methods; in one
	// process the group is the session's own. No other session is in
	// either group.
	syscall.Umask(0o002)
	if !s.pidns {
		// Without a pid namespace, orphans must still be reaped here.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	null, err := syscall.Open("/dev/null", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		null = -1
	}
	s.null = null
	go s.reap()
	go func() {
		<-kitGone
		s.shutdown()
	}()
	// The receive buffer lies outside the Go heap: as a heap object it
	// would start a garbage collection at once (the heap's first goal is
	// 4 MiB), which the first command would wait for. Its pages are only
	// touched by the requests it receives.
	buf, err := unix.Mmap(-1, 0, maxCtlMsg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		buf = make([]byte, maxCtlMsg)
	}
	oob := make([]byte, unix.CmsgSpace(3*4))
	// encoding/json builds its decoder and encoder for ctlMsg on first
	// use, half a millisecond here: now, not on the first command.
	var m0 ctlMsg
	_ = json.Unmarshal([]byte(`{"op":"start","args":[""],"env":[""],"stdio":[true,true,true]}`), &m0)
	_, _ = json.Marshal(&m0)
	ready()
	for {
		n, oobn, _, _, err := unix.Recvmsg(fdControl, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			s.shutdown()
			return 0
		}
		fds := rightsIn(oob[:oobn])
		var m ctlMsg
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			closeFds(fds)
			continue
		}
		switch m.Op {
		case "start":
			s.start(&m, fds)
		case "signal":
			closeFds(fds)
			s.signal(m.ID, syscall.Signal(m.Sig))
		case "pty":
			closeFds(fds)
			s.openPTY(m.ID)
		case "killall":
			closeFds(fds)
			s.killAll(m.ID)
		default:
			closeFds(fds)
		}
	}
}

func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

type sessionSupervisor struct {
	spec  *initSpec
	pidns bool // pid 1 of the session's pid namespace
	null  int

	// mu guards cmds; cleanMu is held while a command starts and while
	// the namespace is emptied after the last command, so that a new
	// command is never caught by that.
	mu      sync.Mutex
	cleanMu sync.Mutex
	cmds    map[int]uint64 // running commands' pids (process groups) -> request id
	aside   map[int]bool   // those of cmds started aside (ctlMsg.Aside)
	wake    chan struct{}  // a command started: the reaper has children again
}

func send(m *ctlMsg, fds ...int) {
	b, _ := json.Marshal(m)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(fdControl, b, oob, nil, 0)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

func (s *sessionSupervisor) start(m *ctlMsg, fds []int) {
	defer closeFds(fds)
	files := make([]uintptr, 3)
	next := 0
	for i := range files {
		if m.Stdio[i] && next < len(fds) {
			files[i] = uintptr(fds[next])
			next++
		} else {
			files[i] = uintptr(s.null)
		}
	}
	var path string
	var err error
	if m.Exe {
		if next >= len(fds) {
			send(&ctlMsg{Op: "error", ID: m.ID, Errno: int(syscall.EBADF), Msg: "start: the request carries no program"})
			return
		}
		// The program is the command's descriptor 3, executed by its
		// /proc path: in the session's own /proc where it has a pid
		// namespace.
		files = append(files, uintptr(fds[next]))
		path = "/proc/self/fd/3"
	} else if path, err = lookPath(m.Path, m.Env); err != nil {
		send(&ctlMsg{Op: "error", ID: m.ID, Errno: int(syscall.ENOENT), Msg: err.Error()})
		return
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: files,
		// A terminal's command gets stdin (fd 0) as its controlling one.
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: m.TTY && m.Stdio[0], Ctty: 0, PidFD: &pidfd},
	}
	if s.spec.UID >= 0 {
		attr.Sys.Credential = &syscall.Credential{Uid: uint32(s.spec.UID), Gid: uint32(s.spec.GID), Groups: []uint32{}}
	}
	s.cleanMu.Lock()
	s.mu.Lock()
	pid, err := syscall.ForkExec(path, m.Args, attr)
	if err == nil {
		s.cmds[pid] = m.ID
		if m.Aside {
			s.aside[pid] = true
		}
	}
	s.mu.Unlock()
	s.cleanMu.Unlock()
	if err != nil {
		errno := 0
		var e syscall.Errno
		if errors.As(err, &e) {
			errno = int(e)
		}
		msg := "start " + path // the kit adds the errno's text
		if errno == 0 {
			msg += ": " + err.Error()
		}
		send(&ctlMsg{Op: "error", ID: m.ID, Errno: errno, Msg: msg})
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if pidfd >= 0 {
		send(&ctlMsg{Op: "started", ID: m.ID, Status: uint32(pid)}, pidfd)
		unix.Close(pidfd)
	} else {
		send(&ctlMsg{Op: "started", ID: m.ID, Status: uint32(pid)})
	}
}

// signal sends sig to the command's process group.
func (s *sessionSupervisor) signal(id uint64, sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, cid := range s.cmds {
		if cid == id {
			if syscall.Kill(-pid, sig) != nil {
				_ = syscall.Kill(pid, sig)
			}
		}
	}
}

// openPTY opens a pseudo-terminal pair in the session's mount namespace
// (its own devpts instance, where it has one), gives the slave to the
// session's user where it can, and sends both ends to the kit.
func (s *sessionSupervisor) openPTY(id uint64) {
	fail := func(what string, err error) {
		errno := 0
		var e syscall.Errno
		if errors.As(err, &e) {
			errno = int(e)
		}
		send(&ctlMsg{Op: "error", ID: id, Errno: errno, Msg: "open a terminal: " + what})
	}
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("/dev/ptmx", err)
		return
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		fail("unlockpt", err)
		return
	}
	n, err := unix.IoctlGetInt(master, unix.TIOCGPTN)
	if err != nil {
		fail("ptsname", err)
		return
	}
	slave, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("its slave", err)
		return
	}
	defer unix.Close(slave)
	if s.spec.UID >= 0 {
		// Its user's, as a login's terminal is (mesg, write, a program
		// that reopens its terminal by name); without the capability it
		// stays the supervisor's, mode 0620, which the command's
		// descriptors need not.
		_ = unix.Fchown(slave, s.spec.UID, s.spec.GID)
	}
	send(&ctlMsg{Op: "pty", ID: id}, master, slave)
}

// killAll kills every process of the session but this one, waits until
// they are gone (bounded) and says so.
func (s *sessionSupervisor) killAll(id uint64) {
	s.cleanMu.Lock()
	if s.pidns {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		waitEmpty(5 * time.Second)
	} else {
		killDescendants(5 * time.Second)
	}
	s.cleanMu.Unlock()
	send(&ctlMsg{Op: "killed", ID: id})
}

// reap waits for every child (commands and the orphans reparented here)
// and reports commands' ends.
func (s *sessionSupervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// No child: wait for the next command.
			<-s.wake
			continue
		}
		s.mu.Lock()
		id, ok := s.cmds[pid]
		aside := s.aside[pid]
		delete(s.cmds, pid)
		delete(s.aside, pid)
		s.mu.Unlock()
		switch {
		case ok && aside:
			send(&ctlMsg{Op: "exit", ID: id, Status: uint32(ws)})
		case ok && !s.finishNow(id, ws):
			go s.finish(id, pid, ws)
		}
	}
}

// finish ends what a command left behind, then reports its end. In a pid
// namespace, once no other command of the session runs, every process in
// the namespace goes (SIGTERM, then SIGKILL after the grace period), as it
// would with the namespace; otherwise the command's process group goes.
func (s *sessionSupervisor) finish(id uint64, pid int, ws syscall.WaitStatus) {
	s.cleanMu.Lock()
	s.mu.Lock()
	last := len(s.cmds) == len(s.aside)
	s.mu.Unlock()
	empty := false
	switch {
	case s.pidns && last:
		if !emptied() {
			_ = syscall.Kill(-1, syscall.SIGTERM)
			if !waitEmpty(s.spec.Grace) {
				_ = syscall.Kill(-1, syscall.SIGKILL)
				waitEmpty(5 * time.Second)
			}
		}
		// Said with the exit, it spares the kit a killall round trip
		// after the command.
		empty = emptied()
	case last:
		// No pid namespace ends what the session's commands left
		// behind: whatever descends from this supervisor goes, setsid
		// or not (orphans are reparented here, the subreaper).
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		killDescendants(5 * time.Second)
	default:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	s.cleanMu.Unlock()
	send(&ctlMsg{Op: "exit", ID: id, Status: uint32(ws), Emptied: empty})
}

// emptied reports whether no process but this one is left in the pid
// namespace (zombies count until reaped).
func emptied() bool {
	return errors.Is(syscall.Kill(-1, 0), syscall.ESRCH)
}

func waitEmpty(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !emptied() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// shutdown kills everything the session runs and exits.
func (s *sessionSupervisor) shutdown() {
	if s.pidns {
		_ = syscall.Kill(-1, syscall.SIGKILL)
	} else {
		killDescendants(2 * time.Second)
	}
	os.Exit(0)
}

// killDescendants kills every live process descended from this one (the
// session's commands, what they started, and the orphans reparented here
// as the subreaper), again and again until none is left or d has passed;
// it reports whether none is left. Without a pid namespace this is how a
// session's processes end: by their ancestry, which a process cannot
// leave (setsid and double forks only move it under this subreaper).
func killDescendants(d time.Duration) bool {
	deadline := time.Now().Add(d)
	self := os.Getpid()
	for {
		pids := liveDescendants(self)
		if len(pids) == 0 {
			return true
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// descendants lists the live (not zombie) processes below pid, read from
// /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := readSmall("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// rightsIn returns the file descriptors an SCM_RIGHTS message carried in
// oob, the ancillary data of one read of the control socket.
func rightsIn(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if f, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}
