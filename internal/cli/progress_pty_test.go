//go:build linux

package cli

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal's master and the path of its slave.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

// throttle is a TCP proxy that passes at most rate bytes a second towards
// to, so that a transfer takes long enough to earn a progress bar.
func throttle(t *testing.T, to string, rate int) string {
	return testkit.Proxy(t, to, func(down, up net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			n, err := down.Read(buf)
			if n > 0 {
				if _, err := up.Write(buf[:n]); err != nil {
					return
				}
				time.Sleep(time.Duration(n) * time.Second / time.Duration(rate)) // a slow link is the subject: the bar must move while bytes trickle
			}
			if err != nil {
				return
			}
		}
	}).Addr().String()
}

// TestProgressBarOnATerminal runs the built gbx with stderr on a
// pseudo-terminal: an upload that takes seconds draws a bar there.
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	bin := buildGbx(t)
	url, key := testBox(t, `{"name":"t"}`)
	slow := throttle(t, strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/"), 8<<20)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte("x"), uploadAbove+8<<20), 0o644)
	m, slave := openPTY(t)
	defer m.Close()
	tty, err := os.OpenFile(slave, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&screen, m) // ends with EIO once the slave is closed
		close(read)
	}()
	cmd := exec.Command(bin, "prompt", "--url", "ws://"+slow+"/", "--key", key, "-f", filepath.Join(dir, "big.bin"), `wc -c < "$GLOVEBOX_INPUT/big.bin"`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	err = cmd.Wait()
	<-read
	if err != nil || strings.TrimSpace(stdout.String()) != fmt.Sprint(uploadAbove+8<<20) {
		t.Fatalf("gbx prompt = %q, %v\nterminal:\n%q", stdout.String(), err, screen.String())
	}
	got := screen.String()
	for _, want := range []string{"\rupload big.bin [", "100%", "16.0 MB / 16.0 MB", "\x1b[K"} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal shows %q, want %q in it", got, want)
		}
	}
}
