package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The landlock layer: the supervisor puts itself, once its own setup is
// done, in a Landlock domain of the session's own, which every command
// inherits. Rules name what the session may reach; everything else of
// the access rights the kernel's ABI knows is refused. A process in a
// domain cannot ptrace, or read the memory or environment (/proc/PID/mem,
// environ) of, a process outside it: the kit, other sessions.

// landlockMaxABI is the newest Landlock ABI whose rights the sandbox
// knows; a newer kernel is used as this one (best effort, as the kernel's
// documentation recommends).
const landlockMaxABI = 7

// Landlock's rule types.
const (
	landlockRulePathBeneath = 1
	landlockRuleNetPort     = 2
)

// The file system access rights of each ABI.
const (
	llExec     = unix.LANDLOCK_ACCESS_FS_EXECUTE
	llWrite    = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	llRead     = unix.LANDLOCK_ACCESS_FS_READ_FILE
	llReadDir  = unix.LANDLOCK_ACCESS_FS_READ_DIR
	llRefer    = unix.LANDLOCK_ACCESS_FS_REFER    // ABI 2
	llTruncate = unix.LANDLOCK_ACCESS_FS_TRUNCATE // ABI 3
	llIoctlDev = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	llFSv1 = 1<<13 - 1 // EXECUTE to MAKE_SYM

	// llFileRights are the rights a rule on a file (not a directory) may
	// carry.
	llFileRights = llExec | llWrite | llRead | llTruncate | llIoctlDev
)

// landlockFS is the file system access rights Landlock ABI abi handles.
func landlockFS(abi int) uint64 {
	fs := uint64(llFSv1)
	if abi >= 2 {
		fs |= llRefer
	}
	if abi >= 3 {
		fs |= llTruncate
	}
	if abi >= 5 {
		fs |= llIoctlDev
	}
	return fs
}

// landlockABI is the Landlock ABI this kernel offers, capped at
// landlockMaxABI, or an error saying why there is none.
func landlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case e == syscall.ENOSYS:
		return 0, errors.New("the kernel has no Landlock (Linux 5.13 and later with CONFIG_SECURITY_LANDLOCK), or the container's seccomp profile refuses its system calls")
	case e == syscall.EOPNOTSUPP:
		return 0, errors.New("this kernel has Landlock disabled (add landlock to the lsm= boot parameter)")
	case e != 0:
		return 0, fmt.Errorf("landlock_create_ruleset refused (%w): the container's seccomp profile may refuse Landlock's system calls", e)
	}
	return min(int(v), landlockMaxABI), nil
}

// landlockSpec is the session's Landlock domain, as the kit asks the
// supervisor for it. The supervisor opens the paths itself, after its
// mounts: the rules name what the session sees.
type landlockSpec struct {
	ABI int `json:"abi"`
	// Hide are the paths the session may not reach (with everything
	// under them, unless RW or RO names it).
	Hide []string `json:"hide,omitempty"`
	RW   []string `json:"rw,omitempty"` // the session's own directories
	RO   []string `json:"ro,omitempty"` // read-only under hidden ones
	// PrivateTmp: /tmp and /dev/shm are the session's own (a tmpfs in
	// its mount namespace, where the hidden paths are empty: every
	// directory may then be listed).
	PrivateTmp bool `json:"private_tmp,omitempty"`
	// Net confines TCP (ABI 4 and later): connect only to EgressPort (0:
	// none) and ListenPort, bind to ListenPort only (0: none).
	Net        bool `json:"net,omitempty"`
	EgressPort int  `json:"egress_port,omitempty"`
	// ListenPort, above 0, confines TCP binds (ABI 4 and later) to that
	// port, with Net or without: the session's one listening port where
	// it shares the host's loopback (its preview port).
	ListenPort int `json:"listen_port,omitempty"`
}

// llRule is one rule: the access allowed beneath path. A rule the walk
// made (nofollow) is left out if path has become a symbolic link since.
type llRule struct {
	path     string
	access   uint64
	nofollow bool
}

// landlockRules are spec's rules. The image is readable and executable,
// but for the hidden paths: since a rule reaches everything beneath its
// directory, no rule may name a hidden path or one of its ancestors; each
// ancestor's other entries get a rule of their own instead (listed now:
// what appears later in an ancestor is out of reach). /dev, /tmp, /proc
// and /sys get rules of their own.
func landlockRules(spec *landlockSpec) []llRule {
	const (
		readExec = llRead | llReadDir | llExec
		readOnly = llRead | llReadDir
		rw       = 1<<62 - 1 // everything, masked by what the ABI handles
		device   = llRead | llWrite | llTruncate | llIoctlDev
	)
	// Specials are never reached by the walk's rules.
	excluded := map[string]bool{"/dev": true, "/tmp": true}
	ancestors := map[string]bool{}
	for _, h := range spec.Hide {
		h = realPath(h)
		if h == "/" {
			continue
		}
		excluded[h] = true
	}
	for p := range excluded {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			ancestors[d] = true
			if d == "/" {
				break
			}
		}
	}
	var rules []llRule
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		entries, err := os.ReadDir(dir)
		if err != nil || depth > 64 {
			return
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case excluded[p]:
			case ancestors[p]:
				walk(p, depth+1)
			case e.Type()&os.ModeSymlink != 0:
				// Reached through its target, which has a rule of its own
				// where it may be reached at all.
			case p == "/proc" || p == "/sys":
				rules = append(rules, llRule{p, readOnly, true})
			default:
				rules = append(rules, llRule{p, readExec, true})
			}
		}
	}
	walk("/", 0)
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty", "ptmx"} {
		rules = append(rules, llRule{path: "/dev/" + d, access: device})
	}
	rules = append(rules, llRule{path: "/dev/pts", access: device | llReadDir})
	if spec.PrivateTmp {
		rules = append(rules, llRule{path: "/tmp", access: rw}, llRule{path: "/dev/shm", access: rw})
		// In the session's mount namespace the hidden paths are empty
		// and /tmp is its own: every directory may be listed.
		rules = append(rules, llRule{path: "/", access: llReadDir})
	}
	for _, p := range spec.RO {
		rules = append(rules, llRule{path: p, access: readOnly})
	}
	for _, p := range spec.RW {
		rules = append(rules, llRule{path: p, access: rw})
	}
	return rules
}

// realPath is p with symbolic links resolved, or p where it cannot be.
func realPath(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// landlockRulesetAttr is struct landlock_ruleset_attr up to ABI 6.
type landlockRulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// landlockNetPortAttr is struct landlock_net_port_attr.
type landlockNetPortAttr struct {
	allowed uint64
	port    uint64
}

// landlockRestrict puts the calling thread (and what it forks from now on)
// in a new Landlock domain made of spec's rules. The thread must have
// no_new_privs set (or CAP_SYS_ADMIN).
func landlockRestrict(spec *landlockSpec) error {
	abi := spec.ABI
	if abi <= 0 {
		return errors.New("landlock: no ABI")
	}
	attr := landlockRulesetAttr{handledFS: landlockFS(abi)}
	size := unsafe.Sizeof(attr.handledFS)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.handledNet)
		if spec.Net {
			attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		}
		if spec.ListenPort > 0 {
			attr.handledNet |= unix.LANDLOCK_ACCESS_NET_BIND_TCP
		}
	}
	if abi >= 6 {
		size += unsafe.Sizeof(attr.scoped)
		attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock: create the ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	for _, r := range landlockRules(spec) {
		if err := landlockAddPath(int(fd), r, attr.handledFS); err != nil {
			return err
		}
	}
	if attr.handledNet&unix.LANDLOCK_ACCESS_NET_CONNECT_TCP != 0 && spec.EgressPort > 0 {
		na := landlockNetPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(spec.EgressPort)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, landlockRuleNetPort, uintptr(unsafe.Pointer(&na)), 0, 0, 0); e != 0 {
			return fmt.Errorf("landlock: allow connections to port %d: %w", spec.EgressPort, e)
		}
	}
	if attr.handledNet != 0 && spec.ListenPort > 0 {
		// Its own port: listen on it, and connect to it (its own server).
		na := landlockNetPortAttr{allowed: attr.handledNet, port: uint64(spec.ListenPort)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, landlockRuleNetPort, uintptr(unsafe.Pointer(&na)), 0, 0, 0); e != 0 {
			return fmt.Errorf("landlock: allow listening on port %d: %w", spec.ListenPort, e)
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock: restrict the session: %w", e)
	}
	return nil
}

// landlockAddPath adds r to the ruleset fd. A path that does not exist (a
// device or directory this image lacks) is left out.
func landlockAddPath(fd int, r llRule, handled uint64) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if r.nofollow {
		flags |= unix.O_NOFOLLOW
	}
	pfd, err := unix.Open(r.path, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return fmt.Errorf("landlock: open %s: %w", r.path, err)
	}
	defer unix.Close(pfd)
	access := r.access & handled
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("landlock: stat %s: %w", r.path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		return nil
	default:
		access &= llFileRights
	}
	if access == 0 {
		return nil
	}
	// struct landlock_path_beneath_attr is packed: 8 bytes of access,
	// then the descriptor.
	var attr [12]byte
	*(*uint64)(unsafe.Pointer(&attr[0])) = access
	*(*int32)(unsafe.Pointer(&attr[8])) = int32(pfd)
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(fd), landlockRulePathBeneath, uintptr(unsafe.Pointer(&attr[0])), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock: allow %s: %w", r.path, e)
	}
	return nil
}
