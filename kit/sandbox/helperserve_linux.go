package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The session helper's own side (helper_linux.go has the kit's): it
// serves requests on its standard input, a SOCK_SEQPACKET socket, until
// the kit closes it. Its arguments: whether the session has a network
// namespace of its own ("1"), then the session's directories.

// helperConcurrency bounds the requests a helper serves at once.
const helperConcurrency = 16

type helperServer struct {
	netns bool
	roots []int // O_PATH descriptors of the session's directories; -1 where none
	send  sync.Mutex
}

// helperMain is a session helper's main.
func helperMain() int {
	if len(os.Args) < 2 {
		return 2
	}
	// The program's descriptor (3) is not needed once it runs.
	unix.Close(3)
	hs := &helperServer{netns: os.Args[1] == "1"}
	for _, dir := range os.Args[2:] {
		fd := -1
		if dir != "" {
			if f, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
				fd = f
			}
		}
		hs.roots = append(hs.roots, fd)
	}
	sem := make(chan struct{}, helperConcurrency)
	buf := make([]byte, maxHelperMsg)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(0, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return 0
		}
		fds := rightsIn(oob[:oobn])
		var req helperReq
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			closeFds(fds)
			continue
		}
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			defer func() {
				// A request the helper cannot serve is answered, never
				// the end of the helper.
				if r := recover(); r != nil {
					hs.reply(&helperRep{ID: req.ID, Err: "bad", Msg: fmt.Sprint("the session helper failed: ", r)}, nil)
				}
			}()
			rep, out := hs.serve(&req, fds)
			closeFds(fds)
			rep.ID = req.ID
			hs.reply(&rep, out)
			closeFds(out)
		}()
	}
}

func (hs *helperServer) reply(rep *helperRep, fds []int) {
	b, _ := json.Marshal(rep)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	hs.send.Lock()
	defer hs.send.Unlock()
	for {
		if err := unix.Sendmsg(0, b, oob, nil, 0); !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// fail is the answer for err (nil: success).
func fail(err error) helperRep {
	var errno syscall.Errno
	switch {
	case err == nil:
		return helperRep{}
	case errors.Is(err, ErrOutside):
		return helperRep{Err: "outside"}
	case errors.Is(err, ErrSpecial):
		return helperRep{Err: "special"}
	case errors.Is(err, ErrNoNetNS):
		return helperRep{Err: "nonetns"}
	case errors.As(err, &errno):
		return helperRep{Errno: int(errno)}
	}
	return helperRep{Err: "bad", Msg: err.Error()}
}

func (hs *helperServer) serve(req *helperReq, fds []int) (helperRep, []int) {
	switch req.Op {
	case "open":
		fd, err := hs.open(req.Root, req.Path, req.Flags, req.Perm)
		if err != nil {
			return fail(err), nil
		}
		return helperRep{}, []int{fd}
	case "mkdir":
		return fail(hs.atParent(req.Root, req.Path, func(dir int, base string) error {
			return unix.Mkdirat(dir, base, req.Perm&0o7777)
		})), nil
	case "mkdirall":
		return fail(hs.mkdirAll(req.Root, req.Path, req.Perm&0o7777)), nil
	case "rename":
		return fail(hs.atParent(req.Root, req.Path, func(from int, fromBase string) error {
			return hs.atParent(req.ToRoot, req.To, func(to int, toBase string) error {
				return unix.Renameat(from, fromBase, to, toBase)
			})
		})), nil
	case "remove":
		return fail(hs.atParent(req.Root, req.Path, func(dir int, base string) error {
			err := unix.Unlinkat(dir, base, 0)
			if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
				if st, serr := fstatat(dir, base); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					err = unix.Unlinkat(dir, base, unix.AT_REMOVEDIR)
				}
			}
			return err
		})), nil
	case "removeall":
		return fail(hs.atParent(req.Root, req.Path, func(dir int, base string) error {
			err := removeAllAt(dir, base, 0)
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return err
		})), nil
	case "chmod":
		fd, err := hs.beneath(req.Root, req.Path, unix.O_PATH, 0)
		if err != nil {
			return fail(err), nil
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fail(err), nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return fail(unix.ELOOP), nil
		}
		// Through the descriptor's /proc name: the file resolved
		// beneath the root, whatever was swapped in since.
		return fail(unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), req.Perm&0o7777, 0)), nil
	case "chtimes":
		ts := []unix.Timespec{unix.NsecToTimespec(req.Time), unix.NsecToTimespec(req.Time)}
		return fail(hs.atParent(req.Root, req.Path, func(dir int, base string) error {
			return unix.UtimesNanoAt(dir, base, ts, unix.AT_SYMLINK_NOFOLLOW)
		})), nil
	case "watch":
		if len(fds) != 1 {
			return helperRep{Err: "bad", Msg: "watch: no inotify descriptor"}, nil
		}
		fd, err := hs.open(req.Root, req.Path, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fail(err), nil
		}
		defer unix.Close(fd)
		// The directory is resolved already (never through a link): its
		// /proc name is a link that must be followed.
		wd, err := unix.InotifyAddWatch(fds[0], "/proc/self/fd/"+strconv.Itoa(fd), (req.Mask&^unix.IN_DONT_FOLLOW)|unix.IN_ONLYDIR)
		if err != nil {
			return fail(err), nil
		}
		return helperRep{WD: wd}, nil
	case "dial":
		fd, err := hs.dial(req.Port)
		if err != nil {
			return fail(err), nil
		}
		return helperRep{}, []int{fd}
	}
	return helperRep{Err: "bad", Msg: "unknown operation " + strconv.Quote(req.Op)}, nil
}

// cleanRel checks a request's path: relative, no NUL; "" is the root.
func cleanRel(rel string) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 || len(rel) > unix.PathMax {
		return "", unix.EINVAL
	}
	if strings.HasPrefix(rel, "/") {
		return "", ErrOutside
	}
	if rel == "" {
		return ".", nil
	}
	return rel, nil
}

func (hs *helperServer) root(r Root) (int, error) {
	if r < 0 || int(r) >= len(hs.roots) || hs.roots[r] < 0 {
		return -1, unix.ENOENT
	}
	return hs.roots[r], nil
}

// beneath opens rel beneath root with flags (the final component never
// followed).
func (hs *helperServer) beneath(r Root, rel string, flags int, perm uint32) (int, error) {
	root, err := hs.root(r)
	if err != nil {
		return -1, err
	}
	if rel, err = cleanRel(rel); err != nil {
		return -1, err
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Mode:    uint64(perm & 0o7777),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := openat2(root, rel, &how)
	switch {
	case errors.Is(err, unix.EXDEV):
		return -1, ErrOutside
	case errors.Is(err, unix.ENOSYS):
		return walkBeneath(root, rel, flags, perm)
	}
	return fd, err
}

// walkBeneath is beneath without openat2 (Linux before 5.6): one
// component at a time, no symbolic link followed at all.
func walkBeneath(root int, rel string, flags int, perm uint32) (int, error) {
	parts := strings.Split(rel, "/")
	dir, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		switch p {
		case "", ".":
			if i < len(parts)-1 {
				continue
			}
		case "..":
			unix.Close(dir)
			return -1, ErrOutside
		}
		if i == len(parts)-1 {
			if p == "" {
				p = "."
			}
			fd, err := unix.Openat(dir, p, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm&0o7777)
			unix.Close(dir)
			return fd, err
		}
		next, err := unix.Openat(dir, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			if st, serr := fstatat(root, strings.Join(parts[:i+1], "/")); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, ErrOutside
			}
		}
		if err != nil {
			return -1, err
		}
		dir = next
	}
	return dir, nil
}

// open opens root/rel for a request: devices, fifos and sockets are
// refused unless flags hold O_PATH (opened without blocking, then
// checked, so a fifo never blocks the helper).
func (hs *helperServer) open(r Root, rel string, flags int, perm uint32) (int, error) {
	if flags&unix.O_PATH != 0 {
		return hs.beneath(r, rel, flags, perm)
	}
	fd, err := hs.beneath(r, rel, flags|unix.O_NONBLOCK, perm)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		unix.Close(fd)
		return -1, ErrSpecial
	}
	if flags&unix.O_NONBLOCK == 0 {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
		}
	}
	return fd, nil
}

// atParent runs f with rel's parent directory (opened beneath root) and
// its last component, which must name something inside (not the root,
// not "." or "..").
func (hs *helperServer) atParent(r Root, rel string, f func(dir int, base string) error) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	rel = strings.TrimRight(rel, "/")
	dirPart, base := path.Split(rel)
	if base == "" || base == "." || base == ".." {
		return unix.EINVAL
	}
	dir, err := hs.beneath(r, dirPart, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return f(dir, base)
}

func (hs *helperServer) mkdirAll(r Root, rel string, perm uint32) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	done := ""
	for _, p := range strings.Split(rel, "/") {
		if p == "" || p == "." {
			continue
		}
		done = path.Join(done, p)
		err := hs.atParent(r, done, func(dir int, base string) error {
			return unix.Mkdirat(dir, base, perm)
		})
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	fd, err := hs.beneath(r, rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// removeAllAt removes base in dir and everything beneath it, never
// following a symbolic link, depth-bounded.
func removeAllAt(dir int, base string, depth int) error {
	err := unix.Unlinkat(dir, base, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return err
	}
	st, serr := fstatat(dir, base)
	if serr != nil {
		return serr
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return err
	}
	if depth > 512 {
		return unix.ELOOP
	}
	sub, err := unix.Openat(dir, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(sub), base)
	for {
		names, rerr := f.Readdirnames(1024)
		for _, n := range names {
			if err := removeAllAt(sub, n, depth+1); err != nil && !errors.Is(err, unix.ENOENT) {
				f.Close()
				return err
			}
		}
		if rerr != nil {
			break
		}
		// Entries removed shift what is left: read again from the start.
		if _, err := f.Seek(0, 0); err != nil {
			break
		}
	}
	f.Close()
	return unix.Unlinkat(dir, base, unix.AT_REMOVEDIR)
}

func fstatat(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// dialTimeout bounds a connect to a session's port.
const dialTimeout = 5 * time.Second

// dial connects to port on the session's loopback.
func (hs *helperServer) dial(port int) (int, error) {
	if !hs.netns {
		return -1, ErrNoNetNS
	}
	if port <= 0 || port > 65535 {
		return -1, unix.EINVAL
	}
	fd, err := connectLoopback(unix.AF_INET, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EADDRNOTAVAIL) {
		fd, err = connectLoopback(unix.AF_INET6, &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}})
		if err != nil {
			return -1, unix.ECONNREFUSED
		}
	}
	return fd, err
}

func connectLoopback(family int, sa unix.Sockaddr) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	err = unix.Connect(fd, sa)
	if errors.Is(err, unix.EINPROGRESS) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		deadline := time.Now().Add(dialTimeout)
		for {
			n, perr := unix.Poll(pfd, int(time.Until(deadline).Milliseconds()))
			if errors.Is(perr, unix.EINTR) {
				continue
			}
			switch {
			case perr != nil:
				err = perr
			case n == 0:
				err = unix.ETIMEDOUT
			default:
				var soerr int
				soerr, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
				if err == nil && soerr != 0 {
					err = syscall.Errno(soerr)
				}
			}
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	// Proxied requests are small writes each way: Nagle's algorithm
	// would hold them for the peer's delayed acknowledgement.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	// The kit's side blocks on it through the runtime poller, which
	// wants it non-blocking: it stays so.
	return fd, nil
}
