//go:build linux

package sandbox

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestTCPFastOpenCannotBypassTheEgressPort: a sendto with MSG_FASTOPEN
// connects a TCP socket without connect(2), past Landlock's TCP rules
// (as this kernel shows when the filter is left out); the filter of a
// confined session refuses it. Both are applied on a thread of their own
// (the filter through prctl, which binds only the calling thread), which
// ends with the check.
func TestTCPFastOpenCannotBypassTheEgressPort(t *testing.T) {
	abi, err := landlockABI()
	if err != nil || abi < 4 {
		t.Skip("Landlock's TCP rules need ABI 4: ", abi, err)
	}
	egress, other := listenLoopback(t), listenLoopback(t)
	for _, filter := range []bool{false, true} {
		var connectErr, tfoErr error
		OwnThread(func() {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				t.Error(err)
				return
			}
			if err := landlockRestrict(&landlockSpec{ABI: abi, Net: true, EgressPort: egress.port()}); err != nil {
				t.Error(err)
				return
			}
			if filter {
				prog, err := seccompFilter(seccompNative, nil, seccompOptions{Confined: true})
				if err != nil {
					t.Error(err)
					return
				}
				fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
				if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
					t.Error(err)
					return
				}
			}
			connectErr = dialTCP(other.port())
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Close(fd)
			tfoErr = unix.Sendto(fd, []byte("hi"), unix.MSG_FASTOPEN, &unix.SockaddrInet4{Port: other.port(), Addr: [4]byte(net.IPv4(127, 0, 0, 1).To4())})
		})
		if !errors.Is(connectErr, syscall.EACCES) {
			t.Errorf("filter %v: connect to another port: %v, want EACCES", filter, connectErr)
		}
		switch {
		case filter && !errors.Is(tfoErr, syscall.EOPNOTSUPP):
			t.Errorf("with the filter, a TCP Fast Open sendto to another port: %v, want EOPNOTSUPP", tfoErr)
		case !filter && tfoErr != nil:
			t.Logf("without the filter, TCP Fast Open is refused here too (%v): the kernel closed the hole", tfoErr)
		}
	}
}
