package main

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// withoutLandlock installs that filter on every thread of the process.
func withoutLandlock() error {
	const enosys = uint32(unix.ENOSYS)
	// landlock_create_ruleset, landlock_add_rule and landlock_restrict_self
	// have the same numbers on every architecture.
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: 444, Jt: 0, Jf: 2},
		{Code: unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K, K: 446, Jt: 1, Jf: 0},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | enosys},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("install the seccomp filter: %w", errno)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno != unix.ENOSYS {
		return fmt.Errorf("landlock_create_ruleset still answers (%v)", errno)
	}
	return nil
}

func init() {
	if os.Getenv(noLandlockEnv) == "1" && os.Getenv("GLOVEBOX_KIT_AS_MAIN") == "1" {
		if err := withoutLandlock(); err != nil {
			fmt.Fprintln(os.Stderr, "test kit:", err)
			os.Exit(3)
		}
	}
}
