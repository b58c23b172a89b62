//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// runBPF runs a classic BPF program on a struct seccomp_data, as the
// kernel would: the instructions the sandbox's filter uses, and a failure
// for any other.
func runBPF(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if int(in.K)+4 > len(data) {
				t.Fatalf("pc %d: load at %d past the data", pc, in.K)
			}
			a = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			var ok bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				ok = a == in.K
			case unix.BPF_JSET:
				ok = a&in.K != 0
			case unix.BPF_JGE:
				ok = a >= in.K
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("pc %d: instruction %#x not interpreted", pc, in.Code)
		}
	}
	t.Fatal("the program ran past its end")
	return 0
}

// seccompData is struct seccomp_data for a call.
func seccompData(arch uint32, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], nr)
	binary.LittleEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

func errnoOf(e syscall.Errno) uint32 { return secRetErrno | uint32(e) }

// TestSeccompFilterProgram runs the filter on the calls it must refuse
// and those it must let through, with and without UDP.
func TestSeccompFilterProgram(t *testing.T) {
	if seccompNative.audit == 0 {
		t.Skip("no filter for this architecture")
	}
	arch := seccompNative.audit
	refused := append(refusedSyscalls, seccompArchRefused...)
	type call struct {
		name     string
		data     []byte
		want     uint32 // unconfined
		confined uint32 // confined; 0: as want
	}
	const sockFlags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	calls := []call{
		{"getpid", seccompData(arch, unix.SYS_GETPID), secRetAllow, 0},
		{"another architecture", seccompData(0x40000003, unix.SYS_GETPID), secRetKillProcess, 0},
		{"ptrace", seccompData(arch, unix.SYS_PTRACE, 16, 1), errnoOf(syscall.EPERM), 0},
		{"clone3", seccompData(arch, unix.SYS_CLONE3), errnoOf(syscall.ENOSYS), 0},
		{"clone, a thread", seccompData(arch, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD|unix.CLONE_SYSVSEM), secRetAllow, 0},
		{"clone, a process with a pidfd", seccompData(arch, unix.SYS_CLONE, unix.CLONE_VFORK|unix.CLONE_VM|unix.CLONE_PIDFD|uint64(syscall.SIGCHLD)), secRetAllow, 0},
		{"clone, a user namespace", seccompData(arch, unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(syscall.SIGCHLD)), errnoOf(syscall.EPERM), 0},
		{"clone, a network namespace", seccompData(arch, unix.SYS_CLONE, unix.CLONE_NEWNET), errnoOf(syscall.EPERM), 0},
		{"clone, flags in the high bits only", seccompData(arch, unix.SYS_CLONE, 1<<40|uint64(syscall.SIGCHLD)), secRetAllow, 0},
		{"unshare, files", seccompData(arch, unix.SYS_UNSHARE, unix.CLONE_FILES), secRetAllow, 0},
		{"unshare, a time namespace", seccompData(arch, unix.SYS_UNSHARE, unix.CLONE_NEWTIME), errnoOf(syscall.EPERM), 0},
		{"unshare, a mount namespace", seccompData(arch, unix.SYS_UNSHARE, unix.CLONE_NEWNS), errnoOf(syscall.EPERM), 0},
		{"ioctl TCGETS", seccompData(arch, unix.SYS_IOCTL, 0, unix.TCGETS), secRetAllow, 0},
		{"ioctl TIOCSTI", seccompData(arch, unix.SYS_IOCTL, 0, unix.TIOCSTI), errnoOf(syscall.EPERM), 0},
		{"ioctl TIOCSTI, high bits set", seccompData(arch, unix.SYS_IOCTL, 0, 0xdeadbeef<<32|unix.TIOCSTI), errnoOf(syscall.EPERM), 0},
		{"ioctl TIOCLINUX", seccompData(arch, unix.SYS_IOCTL, 0, unix.TIOCLINUX), errnoOf(syscall.EPERM), 0},
		{"socket unix", seccompData(arch, unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_DGRAM|sockFlags), secRetAllow, 0},
		{"socketpair unix", seccompData(arch, unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_SEQPACKET), secRetAllow, 0},
		{"socket tcp", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|sockFlags), secRetAllow, 0},
		{"socket tcp6", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM), secRetAllow, 0},
		{"socket tcp, by number", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_TCP), secRetAllow, 0},
		{"socket sctp stream", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP), errnoOf(syscall.EPROTONOSUPPORT), 0},
		{"socket mptcp", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM|sockFlags, unix.IPPROTO_MPTCP), errnoOf(syscall.EPROTONOSUPPORT), 0},
		{"socket sctp seqpacket", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_SEQPACKET, unix.IPPROTO_SCTP), errnoOf(syscall.EPERM), 0},
		{"socket icmp echo", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), secRetAllow, errnoOf(syscall.EPERM)},
		{"sendto", seccompData(arch, unix.SYS_SENDTO, 3, 0, 2, unix.MSG_NOSIGNAL), secRetAllow, 0},
		{"sendto, TCP Fast Open", seccompData(arch, unix.SYS_SENDTO, 3, 0, 2, unix.MSG_FASTOPEN|unix.MSG_NOSIGNAL), secRetAllow, errnoOf(syscall.EOPNOTSUPP)},
		{"sendmsg, TCP Fast Open", seccompData(arch, unix.SYS_SENDMSG, 3, 0, unix.MSG_FASTOPEN), secRetAllow, errnoOf(syscall.EOPNOTSUPP)},
		{"sendmmsg, TCP Fast Open", seccompData(arch, unix.SYS_SENDMMSG, 3, 0, 1, unix.MSG_FASTOPEN), secRetAllow, errnoOf(syscall.EOPNOTSUPP)},
		{"sendmsg", seccompData(arch, unix.SYS_SENDMSG, 3, 0, unix.MSG_DONTWAIT), secRetAllow, 0},
		{"socket udp", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|sockFlags), secRetAllow, errnoOf(syscall.EPERM)},
		{"socket udp6", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_DGRAM), secRetAllow, errnoOf(syscall.EPERM)},
		{"socket raw", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), errnoOf(syscall.EPERM), 0},
		{"socket raw6", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_RAW|sockFlags), errnoOf(syscall.EPERM), 0},
		{"socket SOCK_PACKET", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_PACKET), errnoOf(syscall.EPERM), 0},
		{"socket packet", seccompData(arch, unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW), errnoOf(syscall.EAFNOSUPPORT), 0},
		{"socket vsock", seccompData(arch, unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM), errnoOf(syscall.EAFNOSUPPORT), 0},
		{"socket netlink route", seccompData(arch, unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|sockFlags, unix.NETLINK_ROUTE), secRetAllow, 0},
		{"socket netlink audit", seccompData(arch, unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT), errnoOf(syscall.EPROTONOSUPPORT), 0},
		{"socket family in the high bits", seccompData(arch, unix.SYS_SOCKET, 1<<32|unix.AF_PACKET, unix.SOCK_RAW), errnoOf(syscall.EAFNOSUPPORT), 0},
	}
	if seccompNative.x32 {
		calls = append(calls, call{"x32 getpid", seccompData(arch, x32SyscallBit|39), errnoOf(syscall.ENOSYS), 0})
	}
	for _, r := range refused {
		want := errnoOf(syscall.EPERM)
		if r.errno != 0 {
			want = errnoOf(r.errno)
		}
		calls = append(calls, call{fmt.Sprintf("refused %d", r.nr), seccompData(arch, uint32(r.nr)), want, 0})
	}
	for _, confined := range []bool{false, true} {
		prog, err := seccompFilter(seccompNative, refused, seccompOptions{Confined: confined})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			want := c.want
			if confined && c.confined != 0 {
				want = c.confined
			}
			if got := runBPF(t, prog, c.data); got != want {
				t.Errorf("filter(Confined=%v) on %s = %#x, want %#x", confined, c.name, got, want)
			}
		}
	}
}
