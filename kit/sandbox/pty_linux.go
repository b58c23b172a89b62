package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a new pseudo-terminal pair: the master, which the caller
// reads and writes, and the slave, to give a command as its stdin,
// stdout and stderr with Spec.TTY (and close once it started). It needs
// no privilege: the caller's own /dev/ptmx. cols and rows are its first
// size (0: the kernel's, none).
func OpenPTY(cols, rows uint16) (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: open a terminal: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		m.Close()
		return nil, nil, fmt.Errorf("sandbox: open a terminal: %s: %w", what, err)
	}
	rc, err := m.SyscallConn()
	if err != nil {
		return fail("its master", err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr != nil {
			return
		}
		n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
	}); err != nil {
		return fail("its master", err)
	}
	if ierr != nil {
		return fail("unlockpt or ptsname", ierr)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("its slave", err)
	}
	if cols > 0 && rows > 0 {
		if err := ResizePTY(m, cols, rows); err != nil {
			s.Close()
			return fail("its size", err)
		}
	}
	return m, s, nil
}

// ResizePTY sets a terminal's size (TIOCSWINSZ on its master): its
// foreground process group gets SIGWINCH.
func ResizePTY(master *os.File, cols, rows uint16) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	}); err != nil {
		return err
	}
	return ierr
}
