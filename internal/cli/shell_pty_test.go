//go:build linux

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"golang.org/x/sys/unix"
)

// TestShellOnATerminal runs the built gbx shell on a pseudo-terminal, as
// a person's terminal runs it: raw mode (^C goes to the box's foreground
// process, not to gbx), the window's size and its changes (SIGWINCH)
// reach the remote terminal, and gbx exits with the shell's status.
func TestShellOnATerminal(t *testing.T) {
	bin := buildGbx(t)
	url, key := testBox(t, `{"name":"t"}`)
	m, slave := openPTY(t)
	defer m.Close()
	if err := unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 97, Row: 31}); err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(slave, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	screen := make(chan []byte, 256)
	go func() {
		defer close(screen)
		for {
			buf := make([]byte, 4096)
			n, err := m.Read(buf)
			if n > 0 {
				screen <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	cmd := exec.Command(bin, "shell", "--url", url, "--key", key, "--", "/bin/sh")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm-test"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var seen bytes.Buffer
	until := func(want string) {
		t.Helper()
		ctx := testkit.Context(t, "the terminal to show "+want)
		for {
			if i := strings.Index(seen.String(), want); i >= 0 {
				seen.Next(i + len(want))
				return
			}
			select {
			case b, ok := <-screen:
				if !ok {
					t.Fatalf("the terminal closed before it showed %q; it showed %q", want, seen.String())
				}
				seen.Write(b)
			case <-ctx.Done():
				cmd.Process.Kill()
				t.Fatalf("no %q on the terminal; it showed %q", want, seen.String())
			}
		}
	}
	type_ := func(s string) {
		t.Helper()
		if _, err := m.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	type_("stty size; echo T=$TERM\r")
	until("31 97")
	until("T=xterm-test")
	if err := unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 140, Row: 45}); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, "the resize to reach the box", func() bool {
		type_("stty size\r")
		for {
			select {
			case b := <-screen:
				seen.Write(b)
				if strings.Contains(seen.String(), "45 140") {
					return true
				}
				continue
			default:
			}
			return false
		}
	})
	type_("sleep 1000\r")
	testkit.Until(t, "sleep to run in the box", func() bool { return len(testkit.WithCmdline("sleep\x001000")) > 0 })
	type_("\x03")
	type_("echo after-$?\r")
	until("after-130")
	type_("exit 5\r")
	err = testkit.Exit(t, cmd, "gbx shell to exit")
	if code := cmd.ProcessState.ExitCode(); code != 5 {
		t.Errorf("gbx shell exited %d (%v), want the shell's 5", code, err)
	}
}
