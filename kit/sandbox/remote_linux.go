package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// Dial returns the sandbox of the monitor at the other end of conn (a
// SOCK_SEQPACKET socket, see Monitor), for a front: the same API as New's,
// whose privileged acts (making and removing a session's directories,
// giving it files, starting its supervisor, killing its processes,
// measuring its files) the monitor does. It takes conn over.
func Dial(conn *os.File, log *slog.Logger) (*Sandbox, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fc, err := net.FileConn(conn)
	conn.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: the monitor's socket: %w", err)
	}
	mc := &monitorClient{conn: fc.(*net.UnixConn), waiting: map[uint64]chan monAnswer{}, done: make(chan struct{})}
	go mc.read()
	rep, _, err := mc.call(monRequest{Op: opHello})
	if err != nil {
		mc.close()
		return nil, err
	}
	if rep.Report == nil {
		mc.close()
		return nil, errors.New("sandbox: the monitor sent no report")
	}
	return &Sandbox{log: log, report: *rep.Report, mon: mc, tmpRoot: -1, cfg: Config{Grace: DefaultGrace}}, nil
}

// Close ends a front's connection to its monitor, which then ends every
// session still open. A sandbox from New holds nothing to close but the
// directories it holds open.
func (sb *Sandbox) Close() error {
	if sb.mon != nil {
		sb.mon.close()
	}
	sb.closeRoots()
	if sb.tmpRoot >= 0 {
		unix.Close(sb.tmpRoot)
		sb.tmpRoot = -1
	}
	// Helpers running still hold their own copy of the program.
	sb.helperOnce.Do(func() {})
	if sb.helperExe != nil {
		sb.helperExe.Close()
	}
	return nil
}

// monitorClient is a front's side of the monitor's socket.
type monitorClient struct {
	conn *net.UnixConn
	wmu  sync.Mutex

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan monAnswer
	done    chan struct{} // closed once the connection is gone
}

type monAnswer struct {
	r   monReply
	fds []int
}

// errMonitorGone is why a request has no answer.
var errMonitorGone = errors.New("sandbox: the monitor is gone")

// read hands each reply to its request until the connection ends.
func (mc *monitorClient) read() {
	defer close(mc.done)
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*8))
	for {
		n, oobn, _, _, err := mc.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			break
		}
		fds := rightsIn(oob[:oobn])
		var r monReply
		if json.Unmarshal(buf[:n], &r) != nil {
			closeFds(fds)
			continue
		}
		mc.mu.Lock()
		ch, ok := mc.waiting[r.ID]
		delete(mc.waiting, r.ID)
		mc.mu.Unlock()
		if !ok {
			closeFds(fds)
			continue
		}
		ch <- monAnswer{r, fds}
	}
	mc.conn.Close()
	mc.mu.Lock()
	for id, ch := range mc.waiting {
		delete(mc.waiting, id)
		close(ch)
	}
	mc.mu.Unlock()
}

// call sends req and waits for its reply: an error for a refusal, with
// the descriptors it carries (the caller's to close).
func (mc *monitorClient) call(req monRequest) (monReply, []int, error) {
	ch := make(chan monAnswer, 1)
	mc.mu.Lock()
	mc.next++
	req.ID = mc.next
	mc.waiting[req.ID] = ch
	mc.mu.Unlock()
	b, err := json.Marshal(&req)
	if err == nil {
		mc.wmu.Lock()
		_, err = mc.conn.Write(b)
		mc.wmu.Unlock()
	}
	if err != nil {
		mc.mu.Lock()
		delete(mc.waiting, req.ID)
		mc.mu.Unlock()
		return monReply{}, nil, fmt.Errorf("%w: %v", errMonitorGone, err)
	}
	a, ok := <-ch
	if !ok {
		return monReply{}, nil, errMonitorGone
	}
	if a.r.Error != "" {
		closeFds(a.fds)
		return a.r, nil, errors.New(a.r.Error)
	}
	return a.r, a.fds, nil
}

func (mc *monitorClient) close() {
	mc.conn.Close()
	<-mc.done
}

// open asks the monitor for session id.
func (mc *monitorClient) open(sb *Sandbox, id string) (*Session, error) {
	r, _, err := mc.call(monRequest{Op: opOpen, Session: id})
	if err != nil {
		return nil, err
	}
	ss := &Session{sb: sb, id: id, held: sessionDirs{paths: r.Dirs}, ownsDirs: true, tmp: r.Tmp, uid: r.UID, slot: -1, procs: map[*Process]struct{}{}}
	ss.dirs = ss.held.list()
	return ss, nil
}

// supervise asks the monitor to start the session's supervisor, and
// serves it.
func (mc *monitorClient) supervise(ss *Session) (*sessionSup, net.Listener, error) {
	req := monRequest{Op: opSupervise, Session: ss.id, ConfineNet: ss.ConfineNet, EgressPort: ss.EgressPort}
	if ss.OnListener != nil {
		req.Listener = true
		req.ProxyAddr = ss.ProxyAddr
		if req.ProxyAddr == "" {
			req.ProxyAddr = DefaultProxyAddr
		}
	}
	r, fds, err := mc.call(req)
	if err != nil {
		return nil, nil, err
	}
	want := 2
	if r.Listener {
		want = 3
	}
	if len(fds) != want {
		closeFds(fds)
		return nil, nil, fmt.Errorf("sandbox: the monitor sent %d descriptors for a supervisor, want %d", len(fds), want)
	}
	var ln net.Listener
	if r.Listener {
		lf := os.NewFile(uintptr(fds[2]), "egress-listener")
		ln, err = net.FileListener(lf)
		lf.Close()
		if err != nil {
			closeFds(fds[:2])
			return nil, nil, fmt.Errorf("sandbox: egress listener: %w", err)
		}
	}
	ctl := os.NewFile(uintptr(fds[0]), "control-kit")
	keep := os.NewFile(uintptr(fds[1]), "supervisor-keep")
	// The monitor kills it when the session closes; a supervisor that
	// does not end once its pipes close is the monitor's to end.
	kill := func() { _, _, _ = mc.call(monRequest{Op: opKillAll, Session: ss.id}) }
	// The cgroup, read only: the monitor makes, kills and removes it.
	var cg *cgroup
	if r.Cgroup != "" && len(r.CgroupDirs) > 0 {
		cg = &cgroup{cg: &cgroups{version: r.Cgroup}, dirs: r.CgroupDirs}
		ss.cg = cg
	}
	sp, err := newSessionSup(ctl, keep, r.PidNS, cg, r.Pid, kill, nil)
	if err != nil {
		keep.Close()
		if ln != nil {
			ln.Close()
		}
		return nil, nil, err
	}
	return sp, ln, nil
}

// chown asks the monitor to give path, which must lie in one of the
// session's directories, to the session.
func (mc *monitorClient) chown(ss *Session, path string) error {
	for i, d := range ss.held.paths {
		if d == "" || i >= len(dirNames) {
			continue
		}
		rel, err := filepath.Rel(d, path)
		if err != nil || rel == "." || rel == ".." || !filepath.IsLocal(rel) {
			continue
		}
		_, _, err = mc.call(monRequest{Op: opChown, Session: ss.id, Dir: dirNames[i], Path: rel})
		return err
	}
	return fmt.Errorf("sandbox: %s is not in the session's directories (%s)", path, slices.Compact(ss.dirs))
}

// usage asks the monitor for the size of the session's files.
func (mc *monitorClient) usage(id string) (int64, error) {
	r, _, err := mc.call(monRequest{Op: opUsage, Session: id})
	return r.Used, err
}

// simple sends a request that answers nothing but success or an error.
func (mc *monitorClient) simple(op, id string) error {
	_, _, err := mc.call(monRequest{Op: op, Session: id})
	return err
}

// Remote reports whether the sandbox is a monitor's (Dial).
func (sb *Sandbox) Remote() bool { return sb.mon != nil }

// MonitorGone is closed when a front's monitor is gone (nil, never
// closed, for a sandbox from New): the front has nothing left to serve
// sessions with.
func (sb *Sandbox) MonitorGone() <-chan struct{} {
	if sb.mon == nil {
		return nil
	}
	return sb.mon.done
}
