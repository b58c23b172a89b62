package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp layer: a classic BPF filter the supervisor installs on
// itself once its own setup is done, before it runs any command, so that
// every command of the session inherits it (a filter cannot be removed,
// and every filter a process adds is applied too). It refuses what no
// agent needs and attackers use; everything else is allowed.

// seccomp return values and the offsets in struct seccomp_data.
const (
	secRetKillProcess = 0x80000000
	secRetErrno       = 0x00050000
	secRetAllow       = 0x7fff0000

	secOffNr   = 0
	secOffArch = 4
	secOffArgs = 16 // args[i] at 16+8i; its low 32 bits first (little endian)

	// x32 system calls on x86_64 are numbered from here.
	x32SyscallBit = 0x40000000
)

// cloneNewMask is every CLONE_NEW* flag clone(2) takes; unshare(2) also
// takes CLONE_NEWTIME (0x80, the exit signal's bits in clone's flags).
const cloneNewMask = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// refusedSyscalls are refused outright, with EPERM unless said otherwise.
// seccompArchRefused (per architecture) adds its own.
var refusedSyscalls = []refusal{
	// New namespaces and mounts: the sandbox's own, out of reach.
	{nr: unix.SYS_SETNS}, {nr: unix.SYS_MOUNT}, {nr: unix.SYS_UMOUNT2}, {nr: unix.SYS_PIVOT_ROOT},
	{nr: unix.SYS_OPEN_TREE}, {nr: unix.SYS_OPEN_TREE_ATTR}, {nr: unix.SYS_MOVE_MOUNT}, {nr: unix.SYS_FSOPEN},
	{nr: unix.SYS_FSCONFIG}, {nr: unix.SYS_FSMOUNT}, {nr: unix.SYS_FSPICK}, {nr: unix.SYS_MOUNT_SETATTR},
	// clone3 passes its flags in memory a filter cannot read: ENOSYS
	// makes the C library fall back to clone, whose flags it can.
	{nr: unix.SYS_CLONE3, errno: syscall.ENOSYS},
	// Other processes' memory and descriptors.
	{nr: unix.SYS_PTRACE}, {nr: unix.SYS_PROCESS_VM_READV}, {nr: unix.SYS_PROCESS_VM_WRITEV},
	{nr: unix.SYS_PIDFD_GETFD}, {nr: unix.SYS_KCMP},
	// The kernel's keyrings, BPF, perf, userfaultfd and io_uring: large
	// attack surfaces no agent needs.
	{nr: unix.SYS_KEYCTL}, {nr: unix.SYS_ADD_KEY}, {nr: unix.SYS_REQUEST_KEY},
	{nr: unix.SYS_BPF}, {nr: unix.SYS_PERF_EVENT_OPEN}, {nr: unix.SYS_USERFAULTFD},
	{nr: unix.SYS_IO_URING_SETUP}, {nr: unix.SYS_IO_URING_ENTER}, {nr: unix.SYS_IO_URING_REGISTER},
	// The machine's: modules, kexec, reboot, swap, accounting, quotas,
	// the kernel log, file handles (which reach past the namespace's
	// root).
	{nr: unix.SYS_KEXEC_LOAD}, {nr: unix.SYS_KEXEC_FILE_LOAD},
	{nr: unix.SYS_INIT_MODULE}, {nr: unix.SYS_FINIT_MODULE}, {nr: unix.SYS_DELETE_MODULE},
	{nr: unix.SYS_REBOOT}, {nr: unix.SYS_SWAPON}, {nr: unix.SYS_SWAPOFF}, {nr: unix.SYS_ACCT},
	{nr: unix.SYS_QUOTACTL}, {nr: unix.SYS_SYSLOG},
	{nr: unix.SYS_OPEN_BY_HANDLE_AT}, {nr: unix.SYS_NAME_TO_HANDLE_AT},
}

type refusal struct {
	nr    uintptr
	errno syscall.Errno // 0: EPERM
}

// seccompArch is what the filter checks first: the architecture it was
// built for, and whether x32 numbers are to be refused.
type seccompArch struct {
	audit uint32
	x32   bool
}

// seccompOptions is what a session's filter depends on.
type seccompOptions struct {
	// Confined is for a session whose network is confined to its egress
	// proxy: it refuses UDP (every datagram socket) on AF_INET and
	// AF_INET6, and TCP Fast Open (a sendto or sendmsg with
	// MSG_FASTOPEN connects without connect(2), which Landlock's TCP
	// rules do not see).
	Confined bool `json:"confined,omitempty"`
}

// bpf is a classic BPF program under construction.
type bpf []unix.SockFilter

func (p *bpf) stmt(code uint16, k uint32) {
	*p = append(*p, unix.SockFilter{Code: code, K: k})
}

func (p *bpf) jump(code uint16, k uint32, jt, jf uint8) {
	*p = append(*p, unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k})
}

func (p *bpf) ret(v uint32)     { p.stmt(unix.BPF_RET|unix.BPF_K, v) }
func (p *bpf) load(off uint32)  { p.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
func (p *bpf) loadArg(i uint32) { p.load(secOffArgs + 8*i) }

func errnoRet(e syscall.Errno) uint32 {
	if e == 0 {
		e = syscall.EPERM
	}
	return secRetErrno | uint32(e)&0xffff
}

// block is the check of one system call: its number, and the
// instructions run when it matches, which end in a return.
type block struct {
	nr   uintptr
	body bpf
}

// seccompFilter builds the filter for arch. Every system call is checked
// against a list of blocks, each ending in a return; a call no block
// matches is allowed. The blocks are short, so every jump fits BPF's
// 8-bit offsets.
func seccompFilter(arch seccompArch, refused []refusal, opt seccompOptions) ([]unix.SockFilter, error) {
	var p bpf
	p.load(secOffArch)
	p.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, arch.audit, 1, 0)
	p.ret(secRetKillProcess)
	p.load(secOffNr)
	if arch.x32 {
		p.jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, x32SyscallBit, 0, 1)
		p.ret(errnoRet(syscall.ENOSYS))
	}
	var blocks []block
	for _, r := range refused {
		var b bpf
		b.ret(errnoRet(r.errno))
		blocks = append(blocks, block{r.nr, b})
	}
	// clone and unshare: no new namespace (the flags are an int: their
	// low 32 bits are what the kernel reads).
	for _, c := range []struct {
		nr   uintptr
		mask uint32
	}{{unix.SYS_CLONE, cloneNewMask}, {unix.SYS_UNSHARE, cloneNewMask | unix.CLONE_NEWTIME}} {
		var b bpf
		b.loadArg(0)
		b.jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, c.mask, 0, 1)
		b.ret(errnoRet(syscall.EPERM))
		b.ret(secRetAllow)
		blocks = append(blocks, block{c.nr, b})
	}
	// ioctl: no TIOCSTI (typing into the terminal's input) or TIOCLINUX.
	{
		var b bpf
		b.loadArg(1)
		b.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.TIOCSTI, 2, 0)
		b.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.TIOCLINUX, 1, 0)
		b.ret(secRetAllow)
		b.ret(errnoRet(syscall.EPERM))
		blocks = append(blocks, block{unix.SYS_IOCTL, b})
	}
	for _, nr := range []uintptr{unix.SYS_SOCKET, unix.SYS_SOCKETPAIR} {
		blocks = append(blocks, block{nr, socketBlock(opt)})
	}
	if opt.Confined {
		for _, c := range []struct {
			nr    uintptr
			flags uint32 // the argument that holds the flags
		}{{unix.SYS_SENDTO, 3}, {unix.SYS_SENDMSG, 2}, {unix.SYS_SENDMMSG, 3}} {
			var b bpf
			b.loadArg(c.flags)
			b.jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, unix.MSG_FASTOPEN, 0, 1)
			b.ret(errnoRet(syscall.EOPNOTSUPP))
			b.ret(secRetAllow)
			blocks = append(blocks, block{c.nr, b})
		}
	}
	for _, b := range blocks {
		if len(b.body) > 255 {
			return nil, fmt.Errorf("seccomp: the check of system call %d is %d instructions long, past a jump's reach", b.nr, len(b.body))
		}
		p.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(b.nr), 0, uint8(len(b.body)))
		p = append(p, b.body...)
	}
	p.ret(secRetAllow)
	if len(p) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: the filter has %d instructions, over %d", len(p), unix.BPF_MAXINSNS)
	}
	return p, nil
}

// socketBlock checks socket(2) and socketpair(2): unix sockets of every
// type; TCP (and, unless opt.Confined, datagrams: UDP, ICMP echo) over IPv4
// and IPv6, never raw or packet sockets, nor stream protocols but TCP
// (SCTP, MPTCP: Landlock's TCP rules would not see them); netlink for
// routing information only (the C library's getaddrinfo asks it which
// addresses the machine has); no other family.
func socketBlock(opt seccompOptions) bpf {
	const (
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		typ = 0xf // the type without SOCK_NONBLOCK and SOCK_CLOEXEC
	)
	dgram := uint32(unix.SOCK_DGRAM)
	if opt.Confined {
		dgram = 0xffffffff // no type: the jump is never taken
	}
	var b bpf
	b.loadArg(0) // the family
	b.jump(jeq, unix.AF_UNIX, 0, 1)
	b.ret(secRetAllow)
	b.jump(jeq, unix.AF_NETLINK, 0, 4)
	b.loadArg(2) // the protocol
	b.jump(jeq, unix.NETLINK_ROUTE, 0, 1)
	b.ret(secRetAllow)
	b.ret(errnoRet(syscall.EPROTONOSUPPORT))
	b.jump(jeq, unix.AF_INET, 1, 0)
	b.jump(jeq, unix.AF_INET6, 0, 11) // -> EAFNOSUPPORT
	b.loadArg(1)                      // the type
	b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, typ)
	b.jump(jeq, unix.SOCK_STREAM, 0, 5)
	b.loadArg(2) // a stream's protocol
	b.jump(jeq, 0, 2, 0)
	b.jump(jeq, unix.IPPROTO_TCP, 1, 0)
	b.ret(errnoRet(syscall.EPROTONOSUPPORT))
	b.ret(secRetAllow)
	b.jump(jeq, dgram, 0, 1)
	b.ret(secRetAllow)
	b.ret(errnoRet(syscall.EPERM))
	b.ret(errnoRet(syscall.EAFNOSUPPORT))
	return b
}

// seccompInstall builds the filter for this machine's architecture and
// installs it on every thread of the process. The process must have
// no_new_privs set (or CAP_SYS_ADMIN).
func seccompInstall(opt seccompOptions) error {
	if seccompNative.audit == 0 {
		return errors.New("seccomp: no filter for " + runtime.GOARCH)
	}
	prog, err := seccompFilter(seccompNative, append(refusedSyscalls, seccompArchRefused...), opt)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if e == syscall.ENOSYS {
		// A container's filter that refuses seccomp(2) may still let
		// prctl install one: on this thread only, the one that forks
		// the commands.
		e = 0
		if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
			e = err.(syscall.Errno)
		}
	}
	runtime.KeepAlive(prog)
	if e != 0 {
		return fmt.Errorf("seccomp: install the filter: %w", e)
	}
	return nil
}

// seccompAvailable says why this kernel (or the container's own filter)
// cannot take the sandbox's filter, or nil when it can: it asks whether
// the actions the filter returns are known, which needs seccomp(2).
func seccompAvailable() error {
	if seccompNative.audit == 0 {
		return errors.New("no filter for the " + runtime.GOARCH + " architecture")
	}
	for _, action := range []uint32{secRetErrno, secRetKillProcess, secRetAllow} {
		a := action
		_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a)))
		if e == syscall.ENOSYS {
			// seccomp(2) refused: prctl's filters may still be had.
			if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil {
				return nil
			}
		}
		if e != 0 {
			return fmt.Errorf("seccomp(2) refused (%w): the kernel lacks seccomp filters, or the container's own filter refuses the call", e)
		}
	}
	return nil
}
