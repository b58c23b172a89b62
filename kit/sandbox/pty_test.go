//go:build linux

package sandbox

import (
	"bytes"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A command started with TTY has the PTY as its controlling terminal, in
// the full sandbox and with it off: it sees the size set on the master,
// and ^C typed into the master reaches its foreground process.
func TestTerminalIsTheControllingTTY(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"sandboxed", Config{}}, {"off", Config{Off: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t, tc.cfg)
			ss, dir := b.session(t, "pty")
			checkTTY(t, ss, dir)
		})
	}
	// Through a monitor, as a privilege-separated kit's front starts
	// commands: the front opens the PTY, the session's supervisor makes
	// it the command's terminal.
	t.Run("front", func(t *testing.T) {
		b := newBox(t, Config{})
		b.sb.Close()
		work := filepath.Join(b.root, "work")
		sb, err := New(Config{Hide: []string{b.state, work}, SessionRoots: []string{work, "", ""}, FrontGID: frontGID}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			NewMonitor(sb).Serve(os.NewFile(uintptr(pair[0]), "monitor"))
		}()
		front, err := Dial(os.NewFile(uintptr(pair[1]), "front"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			front.Close()
			<-served
		}()
		ss, err := front.OpenSession(fmt.Sprintf("pty%d", time.Now().UnixNano()))
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		checkTTY(t, ss, ss.Dirs()[0])
	})
}

func checkTTY(t *testing.T, ss *Session, dir string) {
	master, slave, err := ss.OpenPTY(91, 37)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	script := `stty size; test -t 0 && test -t 1 && echo has-tty; tty | sed 's/^/name=/'; (: </dev/tty) 2>/dev/null && echo has-dev-tty; trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done`
	p, err := ss.Start(Spec{
		Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
		Env:   []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir},
		Stdin: slave, Stdout: slave, Stderr: slave, TTY: true,
	})
	slave.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Kill()
	out := make(chan []byte, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				out <- bytes.Clone(buf[:n])
			}
			if err != nil {
				close(out)
				return
			}
		}
	}()
	var seen strings.Builder
	until := func(want string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for !strings.Contains(seen.String(), want) {
			select {
			case b, ok := <-out:
				if !ok {
					t.Fatalf("the terminal closed before %q; it said %q", want, seen.String())
				}
				seen.Write(b)
			case <-deadline:
				t.Fatalf("no %q within 20s; the terminal said %q", want, seen.String())
			}
		}
	}
	until("ready")
	for _, want := range []string{"37 91", "has-tty", "has-dev-tty", "name=/dev/pts/"} {
		if !strings.Contains(seen.String(), want) {
			t.Errorf("the terminal said %q, want %q in it", seen.String(), want)
		}
	}
	if _, err := io.WriteString(master, "\x03"); err != nil {
		t.Fatal(err)
	}
	until("got-int")
	st, err := p.Wait()
	if err != nil || st.Code != 7 {
		t.Errorf("Wait = %v, %v; want exit status 7 from the INT trap", st, err)
	}
}
