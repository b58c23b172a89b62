package sandbox

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// awaitExit returns once the child pid has exited (it stays unreaped, so
// the following Wait returns at once). It waits on a pidfd through the
// runtime's poller, which holds no OS thread: a blocking wait would hold
// one per running process, and the runtime keeps every thread it ever
// made, so the kit's threads would climb with its busiest moment and
// never fall. Where pidfds are not available it returns at once and the
// caller's Wait blocks as before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return n > 0 || (err != nil && err != unix.EINTR)
	})
}

// startOnOwnThread starts cmd on a thread of its own (see OwnThread): a
// start holds its thread in a blocking read until the child has set up
// its namespaces and exec'd, which under load takes a while.
func startOnOwnThread(cmd *exec.Cmd) error {
	var err error
	OwnThread(func() { err = cmd.Start() })
	return err
}
