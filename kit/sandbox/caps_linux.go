package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// clearCapabilities empties the calling thread's inheritable and ambient
// capability sets and, with all, its permitted and effective ones too:
// what a command that cannot have its bounding set emptied must start
// with. Without all, the permitted and effective sets stay for the
// supervisor's own use: the change to the command's uid (never root)
// empties them, which securebits that keep capabilities across it would
// prevent (refused).
func clearCapabilities(all bool) error {
	if !all {
		bits, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0)
		if err != nil {
			return fmt.Errorf("read the securebits: %w", err)
		}
		if bits&(secbitNoSetuidFixup|secbitKeepCaps) != 0 {
			return fmt.Errorf("the kit's securebits (%#x) keep capabilities across a change of uid, and it lacks CAP_SETPCAP to empty the bounding set", bits)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read the capabilities: %w", err)
	}
	for i := range data {
		data[i].Inheritable = 0
		if all {
			data[i].Permitted, data[i].Effective = 0, 0
		}
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear the capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	return nil
}

// The securebits that keep capabilities across a change of uid.
const (
	secbitNoSetuidFixup = 1 << 2
	secbitKeepCaps      = 1 << 4
)

// Capabilities, by number.
const (
	capChown   = 0
	capFowner  = 3
	capSetgid  = 6
	capSetuid  = 7
	capSetpcap = 8
)

// boundingSetEmpty reports whether the process's capability bounding set
// is empty already (a container started with every capability dropped):
// nothing it executes can gain a capability, root included.
func boundingSetEmpty() bool {
	for c := 0; ; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			return c > 0 // EINVAL past the last capability
		}
		if in != 0 {
			return false
		}
	}
}

// effectiveCaps is the process's effective capability set, read from
// /proc/self/status (all of them when it cannot be read).
func effectiveCaps() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ^uint64(0)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return ^uint64(0)
			}
			return n
		}
	}
	return ^uint64(0)
}

func hasCaps(set uint64, caps ...int) bool {
	for _, c := range caps {
		if set&(1<<c) == 0 {
			return false
		}
	}
	return true
}
