//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLandlockEveryABI applies a session's ruleset as each Landlock ABI
// up to the kernel's would (on a thread of its own, which ends with the
// check) and checks what it allows and refuses.
func TestLandlockEveryABI(t *testing.T) {
	kernel, err := landlockABI()
	if err != nil {
		t.Skip("no Landlock here: ", err)
	}
	// Not under /tmp, which a session without a private one cannot reach.
	root, err := os.MkdirTemp("/var/tmp", "landlock-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state, parent := filepath.Join(root, "state"), filepath.Join(root, "work")
	own, other := filepath.Join(parent, "own"), filepath.Join(parent, "other")
	for _, d := range []string{state, own, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(state, "secret"), filepath.Join(other, "f"), filepath.Join(root, "beside")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	egress, closed := listenLoopback(t), listenLoopback(t)
	closed.Close()
	for abi := 1; abi <= kernel; abi++ {
		t.Run(fmt.Sprint("ABI ", abi), func(t *testing.T) {
			spec := &landlockSpec{ABI: abi, Hide: []string{state, parent}, RW: []string{own}, Net: true, EgressPort: egress.port()}
			var errs []string
			OwnThread(func() {
				if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
					errs = append(errs, err.Error())
					return
				}
				if err := landlockRestrict(spec); err != nil {
					errs = append(errs, err.Error())
					return
				}
				check := func(what string, err error, allowed bool) {
					if allowed && err != nil {
						errs = append(errs, fmt.Sprintf("%s: %v, want allowed", what, err))
					}
					if !allowed && !errors.Is(err, syscall.EACCES) {
						errs = append(errs, fmt.Sprintf("%s: %v, want EACCES", what, err))
					}
				}
				_, err := os.ReadFile(filepath.Join(state, "secret"))
				check("read the hidden state", err, false)
				_, err = os.ReadFile(filepath.Join(other, "f"))
				check("read another session's file", err, false)
				_, err = os.ReadDir(parent)
				check("list the sessions' parent", err, false)
				check("write in the own directory", os.WriteFile(filepath.Join(own, "f"), []byte("y"), 0o644), true)
				check("rename in the own directory", os.Rename(filepath.Join(own, "f"), filepath.Join(own, "g")), true)
				_, err = os.ReadFile(filepath.Join(root, "beside"))
				check("read a file beside the hidden paths", err, true)
				check("write a file beside the hidden paths", os.WriteFile(filepath.Join(root, "beside"), []byte("z"), 0o644), false)
				_, err = os.ReadFile("/proc/self/status")
				check("read /proc", err, true)
				_, err = os.ReadDir("/usr/bin")
				check("list /usr/bin", err, true)
				f, err := os.OpenFile("/dev/null", os.O_WRONLY|os.O_TRUNC, 0)
				check("write /dev/null", err, true)
				if err == nil {
					f.Close()
				}
				if abi >= 4 {
					// Raw connects: net.Dial's would retry elsewhere.
					check("connect to the egress port", dialTCP(egress.port()), true)
					check("connect to another port", dialTCP(closed.port()), false)
				}
			})
			for _, e := range errs {
				t.Error(e)
			}
		})
	}
}

// dialTCP connects a TCP socket to 127.0.0.1:port and closes it.
func dialTCP(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte(net.IPv4(127, 0, 0, 1).To4())})
}

// TestLandlockListenPort: a session with a listening port binds that port
// and no other, with Net (where it also connects to it) or without (where
// its connects are not confined).
func TestLandlockListenPort(t *testing.T) {
	kernel, err := landlockABI()
	if err != nil || kernel < 4 {
		t.Skip("no Landlock ABI 4 here: ", kernel, err)
	}
	free := func() int {
		l := listenLoopback(t)
		p := l.port()
		l.Close()
		return p
	}
	own, other, elsewhere := free(), free(), listenLoopback(t)
	for _, confine := range []bool{false, true} {
		t.Run(fmt.Sprint("Net ", confine), func(t *testing.T) {
			var errs []string
			OwnThread(func() {
				if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
					errs = append(errs, err.Error())
					return
				}
				if err := landlockRestrict(&landlockSpec{ABI: kernel, Net: confine, ListenPort: own}); err != nil {
					errs = append(errs, err.Error())
					return
				}
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", own))
				if err != nil {
					errs = append(errs, fmt.Sprintf("listen on the own port: %v", err))
				} else {
					if err := dialTCP(own); err != nil {
						errs = append(errs, fmt.Sprintf("connect to the own port: %v", err))
					}
					l.Close()
				}
				if err := bindTCP(other); !errors.Is(err, syscall.EACCES) {
					errs = append(errs, fmt.Sprintf("bind another port %d: %v, want EACCES", other, err))
				}
				if err := dialTCP(elsewhere.port()); (err == nil) == confine {
					errs = append(errs, fmt.Sprintf("connect to another listening port with Net %v: %v", confine, err))
				}
			})
			for _, e := range errs {
				t.Error(e)
			}
		})
	}
}

// bindTCP binds a TCP socket to 127.0.0.1:port and closes it.
func bindTCP(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte(net.IPv4(127, 0, 0, 1).To4())})
}
