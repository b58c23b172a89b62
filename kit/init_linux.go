package kit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// initChildEnv marks the kit process an init started, so it serves instead
// of starting another child.
const initChildEnv = "GLOVEBOX_INIT_CHILD"

// needsInit reports whether this process is a container's PID 1 and should
// act as its init. A container runs its entrypoint as PID 1, and processes
// that agents start and orphan (an exec prompt's background job, an ACP
// agent's terminals) are re-parented to it: something must reap them, or
// they pile up as zombies until the box runs out of PIDs. Set
// GLOVEBOX_INIT=off when the container already has an init (docker --init,
// tini).
func needsInit() bool {
	return os.Getpid() == 1 && os.Getenv(initChildEnv) == "" && os.Getenv("GLOVEBOX_INIT") != "off"
}

// forwarded are the signals the init passes on to the kit.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// runInit starts this executable again as the kit, forwards signals to it,
// reaps every child that exits, and returns when the kit has exited: nil
// for status 0, an *ExitStatusError otherwise.
func runInit(args []string, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "glovebox-kit: init: %v\n", err)
		return fmt.Errorf("init: %w", err)
	}
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	defer signal.Stop(sigs)

	// The kit reads its environment from a memfd: its own environment
	// block, which /proc shows, holds nothing secret.
	attr := &os.ProcAttr{
		Env:   append(os.Environ(), initChildEnv+"=1"),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	}
	if f, err := envFile(append(os.Environ(), initChildEnv+"=1")); err == nil {
		defer f.Close()
		attr.Env = []string{initChildEnv + "=1", envFDVar + "=3"}
		attr.Files = append(attr.Files, f)
	}
	child, err := os.StartProcess(exe, append([]string{os.Args[0]}, args...), attr)
	if err != nil {
		fmt.Fprintf(stderr, "glovebox-kit: init: start the kit: %v\n", err)
		return fmt.Errorf("init: start the kit: %w", err)
	}
	for {
		// Reap whatever has exited; the kit's own exit ends the init.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			if pid == child.Pid {
				return exitStatus(ws)
			}
		}
		if sig := <-sigs; sig != syscall.SIGCHLD {
			child.Signal(sig)
		}
	}
}

// exitStatus is the init's exit status: the kit's, as a shell reports it.
func exitStatus(ws syscall.WaitStatus) error {
	if st := sandbox.StatusOf(ws); st.Code != 0 {
		return &ExitStatusError{Code: st.Code}
	}
	return nil
}
