package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A session helper does file system and network operations on the kit's
// behalf as the session: started through the session's supervisor like
// any of its commands, it runs as the session's uid, in its namespaces,
// cgroup, Landlock domain and seccomp filter, so it reaches exactly what
// the session's own processes reach. The kit sends it one request per
// packet on a SOCK_SEQPACKET socket (its standard input) and gets
// descriptors back (SCM_RIGHTS): an open file, a directory, a connected
// socket. Bulk I/O then happens on the descriptor in the kit, never
// through the helper. Paths are resolved beneath one of the session's
// directories (openat2 RESOLVE_BENEATH): "..", absolute symbolic links and
// symbolic links out of it fail with ErrOutside.
//
// The helper is started aside (ctlMsg.Aside) when first needed and ends
// with the session, or with the sweep after the session's last command
// (which ends every process of the session): the next call then starts
// another. Its program is the supervisor's, copied once per kit into a
// sealed memfd, so that it runs whatever mounts and Landlock rules the
// session has (a memfd is on no path a rule could miss).

// helperReq is a request to a session helper; helperRep its answer.
type helperReq struct {
	ID    uint64 `json:"id"`
	Op    string `json:"op"` // open, mkdir, mkdirall, rename, remove, removeall, chmod, chtimes, watch, dial
	Root  Root   `json:"root"`
	Path  string `json:"path,omitempty"`
	Flags int    `json:"flags,omitempty"`
	Perm  uint32 `json:"perm,omitempty"`
	// rename's destination
	ToRoot Root   `json:"to_root,omitempty"`
	To     string `json:"to,omitempty"`
	Mask   uint32 `json:"mask,omitempty"` // watch
	Port   int    `json:"port,omitempty"` // dial
	Time   int64  `json:"time,omitempty"` // chtimes: Unix nanoseconds
}

type helperRep struct {
	ID    uint64 `json:"id"`
	Errno int    `json:"errno,omitempty"`
	// Err names a helper error (outside, special, nonetns, bad) where
	// there is no errno.
	Err string `json:"err,omitempty"`
	Msg string `json:"msg,omitempty"`
	WD  int    `json:"wd,omitempty"` // watch
}

// maxHelperMsg bounds a request or an answer.
const maxHelperMsg = 64 << 10

// Helper is the kit's side of a session's helper: a handle that lasts as
// long as the session, whatever helper process serves it at the moment.
type Helper struct {
	ss *Session
	mu sync.Mutex // held while a process starts
	p  *helperProc
}

// helperProc is one helper process and its socket.
type helperProc struct {
	conn *net.UnixConn
	proc *Process

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan helperAnswer
	gone    bool
	done    chan struct{}
}

type helperAnswer struct {
	rep helperRep
	fds []int
}

// Helper returns the session's helper, starting its process if none
// runs (so that a helper that cannot start says so now).
func (ss *Session) Helper() (*Helper, error) {
	ss.helperMu.Lock()
	if ss.helper == nil {
		ss.helper = &Helper{ss: ss}
	}
	h := ss.helper
	ss.helperMu.Unlock()
	if _, err := h.proc(); err != nil {
		return nil, err
	}
	return h, nil
}

// proc returns the running helper process, starting one if none runs.
func (h *Helper) proc() (*helperProc, error) {
	if err := h.ss.woken(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p != nil && !h.p.isGone() {
		return h.p, nil
	}
	p, err := h.ss.startHelper()
	if err != nil {
		return nil, err
	}
	h.p = p
	return p, nil
}

// close ends the helper's process, if one runs.
func (h *Helper) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p != nil {
		h.p.close()
	}
}

func (ss *Session) startHelper() (*helperProc, error) {
	ss.mu.Lock()
	closed := ss.closed
	ss.mu.Unlock()
	if closed {
		return nil, errors.New("sandbox: the session has ended")
	}
	exe, err := ss.sb.helperProgram()
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the session helper's socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "helper"), os.NewFile(uintptr(fds[1]), "helper")
	defer theirs.Close()
	netns := "0"
	if ss.sb.report.Has(LayerNetwork) {
		netns = "1"
	}
	args := append([]string{HelperName, netns}, ss.dirs...)
	spec := Spec{Path: HelperName, Args: args, Dir: "/", Env: []string{}, Stdin: theirs, exe: exe, aside: true}
	var p *Process
	if ss.sb.plain {
		spec.Path = "/proc/self/fd/" + strconv.Itoa(int(exe.Fd()))
		p, err = ss.startPlain(spec.Path, spec)
	} else {
		p, err = ss.startVia(HelperName, spec)
	}
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("sandbox: start the session helper: %w", err)
	}
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("sandbox: the session helper's socket: %w", err)
	}
	hp := &helperProc{conn: fc.(*net.UnixConn), proc: p, waiting: map[uint64]chan helperAnswer{}, done: make(chan struct{})}
	go hp.read()
	go func() {
		// Its end, whatever the reason, fails what it has not answered.
		<-p.Done()
		hp.conn.Close()
	}()
	return hp, nil
}

// helperProgram is the program session helpers run: the supervisor's
// (the sibling glovebox-sandbox, else this program), copied once into a
// sealed, executable memfd.
func (sb *Sandbox) helperProgram() (*os.File, error) {
	sb.helperOnce.Do(func() {
		sb.helperExe, sb.helperErr = sealedCopy(sb.sup)
	})
	return sb.helperExe, sb.helperErr
}

func sealedCopy(sup *supervisor) (*os.File, error) {
	var src *os.File
	var err error
	if sup != nil && sup.exe != nil {
		src, err = os.Open(fdPath(int(sup.exe.Fd())))
	} else {
		src, err = os.Open("/proc/self/exe")
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: open the session helper's program: %w", err)
	}
	defer src.Close()
	const mfdExec = 0x10 // MFD_EXEC (Linux 6.3): executable where vm.memfd_noexec asks for a choice
	fd, err := unix.MemfdCreate(HelperName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|mfdExec)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(HelperName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: a memfd for the session helper: %w", err)
	}
	// Above the descriptors os/exec shuffles (see supervisorFd).
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, supervisorFd)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("sandbox: a memfd for the session helper: %w", err)
	}
	f := os.NewFile(uintptr(high), HelperName)
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: copy the session helper's program: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: seal the session helper's program: %w", err)
	}
	return f, nil
}

func (h *helperProc) isGone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gone
}

// read dispatches answers until the socket closes, then fails what
// waits.
func (h *helperProc) read() {
	buf := make([]byte, maxHelperMsg)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := h.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			break
		}
		fds := rightsIn(oob[:oobn])
		var rep helperRep
		if json.Unmarshal(buf[:n], &rep) != nil {
			closeFds(fds)
			continue
		}
		h.mu.Lock()
		ch := h.waiting[rep.ID]
		delete(h.waiting, rep.ID)
		h.mu.Unlock()
		if ch == nil {
			closeFds(fds)
			continue
		}
		ch <- helperAnswer{rep, fds}
	}
	h.mu.Lock()
	h.gone = true
	waiting := h.waiting
	h.waiting = nil
	h.mu.Unlock()
	for _, ch := range waiting {
		ch <- helperAnswer{rep: helperRep{Err: "gone"}}
	}
	close(h.done)
}

// close ends the helper process: it exits once its socket closes.
func (h *helperProc) close() {
	h.conn.Close()
	<-h.done
}

// helperWait bounds how long a request waits for its answer: a helper
// stopped with the session's processes (SIGSTOP, a frozen cgroup) must
// not hold a request forever.
const helperWait = 2 * time.Minute

// errNotSent: the request never reached the helper process (it had
// ended): it may be sent to the next.
var errNotSent = errors.New("not sent")

// call sends req (with fds) to the running helper process, starting one
// if none runs, and waits for the answer. A request that never reached
// a process (it had ended) goes to the next one; one that reached a
// process that ended before answering fails with ErrHelperGone, since
// it may have been done.
func (h *Helper) call(req helperReq, fds ...int) (helperAnswer, error) {
	for try := 0; ; try++ {
		p, err := h.proc()
		if err != nil {
			return helperAnswer{}, err
		}
		a, err := p.call(req, fds...)
		if errors.Is(err, errNotSent) {
			if try == 0 {
				continue
			}
			err = ErrHelperGone
		}
		return a, err
	}
}

func (h *helperProc) call(req helperReq, fds ...int) (helperAnswer, error) {
	ch := make(chan helperAnswer, 1)
	h.mu.Lock()
	if h.gone {
		h.mu.Unlock()
		return helperAnswer{}, errNotSent
	}
	h.next++
	req.ID = h.next
	h.waiting[req.ID] = ch
	h.mu.Unlock()
	b, _ := json.Marshal(&req)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := h.conn.WriteMsgUnix(b, oob, nil); err != nil {
		h.mu.Lock()
		delete(h.waiting, req.ID)
		h.mu.Unlock()
		return helperAnswer{}, errNotSent
	}
	t := time.NewTimer(helperWait)
	defer t.Stop()
	select {
	case a := <-ch:
		if a.rep.Err == "gone" {
			return a, ErrHelperGone
		}
		return a, nil
	case <-t.C:
		h.mu.Lock()
		delete(h.waiting, req.ID)
		h.mu.Unlock()
		return helperAnswer{}, fmt.Errorf("sandbox: the session helper did not answer within %v", helperWait)
	}
}

// pathErr is the error of an answer to op on root/rel, or nil.
func (h *Helper) pathErr(a helperAnswer, op string, root Root, rel string) error {
	var err error
	switch {
	case a.rep.Errno != 0:
		err = syscall.Errno(a.rep.Errno)
	case a.rep.Err == "outside":
		err = ErrOutside
	case a.rep.Err == "special":
		err = ErrSpecial
	case a.rep.Err == "nonetns":
		err = ErrNoNetNS
	case a.rep.Err != "":
		err = errors.New(a.rep.Msg)
	default:
		return nil
	}
	return &os.PathError{Op: op, Path: displayPath(root, rel), Err: err}
}

// displayPath names root/rel as the session knows it: "work/a/b".
func displayPath(root Root, rel string) string {
	if rel == "" || rel == "." {
		return root.String()
	}
	return path.Join(root.String(), rel)
}

// simple runs an operation that answers no descriptor.
func (h *Helper) simple(req helperReq, fds ...int) (helperRep, error) {
	a, err := h.call(req, fds...)
	if err != nil {
		return helperRep{}, &os.PathError{Op: req.Op, Path: displayPath(req.Root, req.Path), Err: err}
	}
	closeFds(a.fds)
	return a.rep, h.pathErr(a, req.Op, req.Root, req.Path)
}

// Open opens root/rel with open(2) flags and perm, as the session. The
// final component is never followed when it is a symbolic link (O_PATH
// opens the link itself; anything else fails with ELOOP). Devices,
// fifos and sockets fail with ErrSpecial unless flags hold O_PATH.
func (h *Helper) Open(root Root, rel string, flags int, perm uint32) (*os.File, error) {
	a, err := h.call(helperReq{Op: "open", Root: root, Path: rel, Flags: flags, Perm: perm})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: displayPath(root, rel), Err: err}
	}
	if err := h.pathErr(a, "open", root, rel); err != nil {
		closeFds(a.fds)
		return nil, err
	}
	if len(a.fds) != 1 {
		closeFds(a.fds)
		return nil, &os.PathError{Op: "open", Path: displayPath(root, rel), Err: errors.New("the session helper sent no descriptor")}
	}
	return os.NewFile(uintptr(a.fds[0]), displayPath(root, rel)), nil
}

// Mkdir makes the directory root/rel.
func (h *Helper) Mkdir(root Root, rel string, perm uint32) error {
	_, err := h.simple(helperReq{Op: "mkdir", Root: root, Path: rel, Perm: perm})
	return err
}

// MkdirAll makes root/rel and its missing parents.
func (h *Helper) MkdirAll(root Root, rel string, perm uint32) error {
	_, err := h.simple(helperReq{Op: "mkdirall", Root: root, Path: rel, Perm: perm})
	return err
}

// Rename renames root/from to toRoot/to (rename(2): EXDEV where the two
// are on different file systems).
func (h *Helper) Rename(root Root, from string, toRoot Root, to string) error {
	_, err := h.simple(helperReq{Op: "rename", Root: root, Path: from, ToRoot: toRoot, To: to})
	return err
}

// Remove removes a file, a symbolic link or an empty directory.
func (h *Helper) Remove(root Root, rel string) error {
	_, err := h.simple(helperReq{Op: "remove", Root: root, Path: rel})
	return err
}

// RemoveAll removes root/rel and everything beneath it; never the root
// itself. Nothing there is not an error.
func (h *Helper) RemoveAll(root Root, rel string) error {
	_, err := h.simple(helperReq{Op: "removeall", Root: root, Path: rel})
	return err
}

// Chmod sets the permission bits of root/rel (never through a symbolic
// link: a link is refused).
func (h *Helper) Chmod(root Root, rel string, perm uint32) error {
	_, err := h.simple(helperReq{Op: "chmod", Root: root, Path: rel, Perm: perm})
	return err
}

// Chtimes sets the access and modification times of root/rel to t; a
// symbolic link's own times, never its target's.
func (h *Helper) Chtimes(root Root, rel string, t time.Time) error {
	_, err := h.simple(helperReq{Op: "chtimes", Root: root, Path: rel, Time: t.UnixNano()})
	return err
}

// Watch adds an inotify watch on the directory root/rel to ino (made by
// the caller with unix.InotifyInit1), as the session, and returns its
// watch descriptor.
func (h *Helper) Watch(ino *os.File, root Root, rel string, mask uint32) (int, error) {
	// Through its raw descriptor: ino.Fd() would make it blocking, and a
	// blocked read would not end when ino is closed.
	rc, err := ino.SyscallConn()
	if err != nil {
		return 0, err
	}
	var rep helperRep
	cerr := rc.Control(func(fd uintptr) {
		rep, err = h.simple(helperReq{Op: "watch", Root: root, Path: rel, Mask: mask}, int(fd))
	})
	if cerr != nil {
		return 0, cerr
	}
	return rep.WD, err
}

// Dial connects, inside the session's network namespace and as the
// session, to TCP port on 127.0.0.1 (or ::1 when that refuses) and
// returns the connected socket. Without a network namespace of its own
// it fails with ErrNoNetNS.
func (h *Helper) Dial(port int) (*os.File, error) {
	name := "localhost:" + strconv.Itoa(port)
	if port <= 0 || port > 65535 {
		return nil, &os.PathError{Op: "dial", Path: name, Err: errors.New("no such port")}
	}
	a, err := h.call(helperReq{Op: "dial", Port: port})
	if err != nil {
		return nil, &os.PathError{Op: "dial", Path: name, Err: err}
	}
	if a.rep.Errno != 0 || a.rep.Err != "" {
		closeFds(a.fds)
		e := h.pathErr(a, "dial", 0, "").(*os.PathError)
		e.Path = name
		return nil, e
	}
	if len(a.fds) != 1 {
		closeFds(a.fds)
		return nil, &os.PathError{Op: "dial", Path: name, Err: errors.New("the session helper sent no socket")}
	}
	return os.NewFile(uintptr(a.fds[0]), name), nil
}
