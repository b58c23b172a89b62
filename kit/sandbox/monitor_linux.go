package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Privilege separation. Where the kit runs as root with a uid per
// session, the process that keeps root (the monitor) does only what needs
// it, and everything that parses clients' and agents' bytes (HTTP,
// WebSocket, JSON, uploads, the egress proxy with the CA key and brokered
// secrets) runs in another process (the front) under an unprivileged uid
// with no capabilities. The front holds a *Sandbox from Dial, whose
// sessions ask the monitor, over a SOCK_SEQPACKET socket, for what they
// cannot do themselves (monitorwire_linux.go lists the ops). The monitor:
//
//   - takes sessions by id only: it makes their directories under its own
//     Config.SessionRoots, their temporary directory under its TmpRoot,
//     their uid from its range and their cgroup, and derives every path
//     and uid it acts on from them, never from the front;
//   - accepts one path from the front, in chown: relative, resolved below
//     one of that session's directories held open, with openat2 refusing
//     "..", absolute paths, symbolic links and mount crossings, and only
//     for a regular file with one link (a hard link the front made to a
//     file elsewhere would give that file away);
//   - starts a session's supervisor and hands the front its control
//     socket and keep-alive pipe (and its egress listener): the supervisor
//     has already dropped to the session's uid, with no capability,
//     Landlock and seccomp in force, so the front talks to it directly
//     and a command costs what it costs without a monitor;
//   - measures the session's files itself (usage), as root, so an agent
//     cannot hide bytes from limits.disk by making them unreadable;
//   - ends every session it opened when the front goes away.
//
// The front reads and writes a session's directories through its group:
// they are the session's uid's, group Config.FrontGID, mode 02770 (the
// setgid bit passes the group on), and the session's commands run with
// umask 0002, so the front reads and rewrites what they make (ACP's
// fs methods), writes inputs at the top of the input directory and hands
// what it creates to the session (chown). An agent that changes its
// umask or modes only keeps the kit out of its own files. Other sessions
// are not in that group (their supplementary groups are cleared) and
// reach none of it.

// maxRequests bounds the requests a monitor serves at once.
const maxRequests = 64

// Monitor serves a front's requests for the sessions of a sandbox.
type Monitor struct {
	sb *Sandbox

	mu       sync.Mutex
	sessions map[string]*monSession
	wmu      sync.Mutex // one reply written at a time
}

// monSession is a session the monitor opened for the front.
type monSession struct {
	mu  sync.Mutex // one request of the session at a time
	ss  *Session
	sup *Process // its supervisor, once started
}

// NewMonitor serves sb's sessions to a front.
func NewMonitor(sb *Sandbox) *Monitor {
	return &Monitor{sb: sb, sessions: map[string]*monSession{}}
}

// Serve answers the front on conn (its end of a SOCK_SEQPACKET socket
// pair) until the front closes it, then ends every session the front had
// open. Requests are served concurrently, those of one session in order.
func (m *Monitor) Serve(conn *os.File) error {
	// Closed whatever happens: a front whose monitor cannot serve sees
	// its socket end instead of waiting for a hello.
	defer conn.Close()
	fc, err := net.FileConn(conn)
	if err != nil {
		return fmt.Errorf("sandbox: monitor: %w", err)
	}
	c := fc.(*net.UnixConn)
	defer c.Close()
	var wg sync.WaitGroup
	defer m.closeAll()
	defer wg.Wait()
	buf := make([]byte, maxMonitorMsg+1)
	oob := make([]byte, unix.CmsgSpace(4*8))
	// At most maxRequests at a time: past that the front waits.
	slots := make(chan struct{}, maxRequests)
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return nil
		}
		// Requests carry no descriptor: any sent is closed unread.
		closeFds(rightsIn(oob[:oobn]))
		req, err := decodeRequest(buf[:n])
		if err != nil {
			m.reply(c, monReply{ID: req.ID, Error: err.Error()}, nil)
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots }()
			defer wg.Done()
			rep, fds := m.handle(req)
			rep.ID = req.ID
			m.reply(c, rep, fds)
			closeFds(fds)
		}()
	}
}

// reply writes one reply, with fds.
func (m *Monitor) reply(c *net.UnixConn, rep monReply, fds []int) {
	b, _ := json.Marshal(&rep)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	_, _, _ = c.WriteMsgUnix(b, oob, nil)
}

// handle does what a checked request asks and returns the reply, with
// descriptors to send (closed once sent).
func (m *Monitor) handle(req monRequest) (monReply, []int) {
	switch req.Op {
	case opHello:
		r := m.sb.Report()
		return monReply{Report: &r}, nil
	case opOpen:
		return m.open(req.Session), nil
	case opReclaim:
		return m.reclaim(req.Session, req.Keep), nil
	}
	m.mu.Lock()
	ms := m.sessions[req.Session]
	m.mu.Unlock()
	if ms == nil {
		return refuse("session %q is not open", req.Session), nil
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.ss == nil {
		return refuse("session %q is not open", req.Session), nil
	}
	switch req.Op {
	case opSupervise:
		return ms.supervise(req)
	case opChown:
		return ms.chown(req.Dir, req.Path), nil
	case opClear:
		if err := ms.clear(); err != nil {
			return monReply{Error: err.Error()}, nil
		}
		return monReply{}, nil
	case opUsage:
		pid := 0
		if ms.sup != nil && !ms.sup.exited() {
			pid = ms.sup.cmd.Process.Pid
		}
		return monReply{Used: ms.ss.diskUsedHere(pid)}, nil
	case opKillAll:
		ms.ss.KillAll()
		return monReply{}, nil
	case opPause, opWake:
		f := ms.ss.Pause
		if req.Op == opWake {
			f = ms.ss.Wake
		}
		if err := f(); err != nil {
			return monReply{Error: err.Error()}, nil
		}
		return monReply{}, nil
	case opClose:
		if req.Keep {
			ms.ss.mu.Lock()
			ms.ss.keepDirs = true
			ms.ss.mu.Unlock()
		}
		ms.close()
		m.mu.Lock()
		delete(m.sessions, req.Session)
		m.mu.Unlock()
		return monReply{}, nil
	}
	return refuse("unknown op %q", req.Op), nil
}

func refuse(format string, args ...any) monReply {
	return monReply{Error: errRefused.Error() + ": " + fmt.Sprintf(format, args...)}
}

// open makes session id's directories, uid and temporary directory.
func (m *Monitor) open(id string) monReply {
	m.mu.Lock()
	if _, ok := m.sessions[id]; ok {
		m.mu.Unlock()
		return refuse("session %q is open already", id)
	}
	ms := &monSession{}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	m.sessions[id] = ms
	m.mu.Unlock()
	ss, err := m.sb.OpenSession(id)
	if err != nil {
		m.mu.Lock()
		delete(m.sessions, id)
		m.mu.Unlock()
		return monReply{Error: err.Error()}
	}
	ms.ss = ss
	return monReply{Dirs: ss.held.paths, UID: ss.uid, Tmp: ss.tmp}
}

// reclaim removes what a dead kit's session id left: its cgroup and the
// processes in it, its directories and its temporary directory. A
// session this monitor has open is refused.
func (m *Monitor) reclaim(id string, keep bool) monReply {
	m.mu.Lock()
	_, open := m.sessions[id]
	m.mu.Unlock()
	if open {
		return refuse("session %q is open: only a dead kit's session is reclaimed", id)
	}
	sb := m.sb
	r := monReply{Reclaimed: sb.Reclaim(id)}
	if keep {
		return r
	}
	if err := sb.removeDirs(id); err != nil {
		r.Error = err.Error()
	}
	if sb.tmpRoot >= 0 {
		_ = os.RemoveAll(fdPath(sb.tmpRoot) + "/" + id)
	}
	return r
}

// supervise starts the session's supervisor, ending the one before if it
// still runs, and returns its control socket, the write end of its spec
// pipe (which keeps it alive while open) and, when asked for, the egress
// listener made in its network namespace.
func (ms *monSession) supervise(req monRequest) (monReply, []int) {
	ss := ms.ss
	ms.endSup()
	ss.ConfineNet, ss.EgressPort, ss.ProxyAddr = req.ConfineNet, req.EgressPort, req.ProxyAddr
	ss.OnListener = nil
	if req.Listener {
		ss.OnListener = func(net.Listener) {}
	}
	is, flags, err := ss.prepareSup()
	if err != nil {
		return monReply{Error: err.Error()}, nil
	}
	p, ctl, err := spawnSessionSup(ss.sb.program(), is, flags, ss.cg)
	if err != nil {
		return monReply{Error: err.Error()}, nil
	}
	ms.sup = p
	files := []*os.File{ctl, p.specW}
	rep := monReply{Pid: p.cmd.Process.Pid, PidNS: p.pidns}
	if ss.cg != nil {
		rep.Cgroup, rep.CgroupDirs = ss.cg.cg.version, ss.cg.dirs
	}
	if p.listener != nil {
		lf, err := p.listener.(*net.TCPListener).File()
		p.listener.Close()
		if err != nil {
			closeFiles(files...)
			ms.endSup()
			return monReply{Error: fmt.Sprintf("sandbox: egress listener: %v", err)}, nil
		}
		files = append(files, lf)
		rep.Listener = true
	}
	fds, err := dupFds(files...)
	// The front's copies are the ones that count: its copy of the spec
	// pipe keeps the supervisor alive.
	closeFiles(files...)
	if err != nil {
		ms.endSup()
		return monReply{Error: err.Error()}, nil
	}
	return rep, fds
}

// dupFds duplicates the files' descriptors, for sending.
func dupFds(files ...*os.File) ([]int, error) {
	var fds []int
	for _, f := range files {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeFds(fds)
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// exited reports whether the process has ended.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// endSup kills the session's supervisor, if it runs, and waits until it
// is gone (bounded).
func (ms *monSession) endSup() {
	p := ms.sup
	if p == nil {
		return
	}
	ms.sup = nil
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// chown gives path, below the session's directory dir, to the session.
func (ms *monSession) chown(dir, path string) monReply {
	ss := ms.ss
	i := slices.Index(dirNames, dir)
	if i < 0 || i >= len(ss.held.fds) || ss.held.fds[i] < 0 {
		return refuse("the box has no %s directory", dir)
	}
	if ss.uid < 0 {
		return monReply{}
	}
	if err := giveFile(ss.held.fds[i], path, ss.uid); err != nil {
		return refuse("chown %s of %s: %v", path, dir, err)
	}
	return monReply{}
}

// giveFile gives rel, below the directory dirfd, to uid (and gid uid):
// only a regular file with one link, resolved as beneath says.
func giveFile(dirfd int, rel string, uid int) error {
	fd, err := openBeneath(dirfd, rel, unix.O_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file")
	}
	if st.Nlink != 1 {
		return fmt.Errorf("a file with %d links", st.Nlink)
	}
	return unix.Fchownat(fd, "", uid, uid, unix.AT_EMPTY_PATH)
}

// clear empties the session's work directory.
func (ms *monSession) clear() error {
	fds := ms.ss.held.fds
	if len(fds) == 0 || fds[0] < 0 {
		return nil
	}
	if err := clearDir(fds[0]); err != nil {
		return fmt.Errorf("sandbox: clear the work directory: %w", err)
	}
	return nil
}

// close ends the session: its supervisor, every process, its cgroup,
// directories and temporary directory; its uid is free again.
func (ms *monSession) close() {
	ms.endSup()
	ms.ss.Close()
	ms.ss = nil
}

// closeAll ends every session the front had open.
func (m *Monitor) closeAll() {
	m.mu.Lock()
	all := m.sessions
	m.sessions = map[string]*monSession{}
	m.mu.Unlock()
	for _, ms := range all {
		ms.mu.Lock()
		if ms.ss != nil {
			ms.close()
		}
		ms.mu.Unlock()
	}
}
