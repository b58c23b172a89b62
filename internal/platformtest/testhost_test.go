//go:build platforms

package platformtest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testHost is a host outside the box: a network namespace the test
// creates, joined to this machine's by a veth pair with addresses in
// 198.18.0.0/15 (RFC 2544's benchmarking range), serving HTTP on a TCP
// port and a UDP echo. Nothing else is ever sent anywhere.
type testHost struct {
	addr      string // its address
	port, udp int
}

func startTestHost(t *testing.T) *testHost {
	t.Helper()
	id := randomHex(t, 3)
	ns, hostIf, peerIf := "gbplat-"+id, "gbph"+id, "gbpp"+id
	// A /30 in 198.19.0.0/16 that no interface of this machine holds.
	var b [2]byte
	var prefix string
	for range 20 {
		rand.Read(b[:])
		prefix = fmt.Sprintf("198.19.%d.%d", b[0], b[1]&^3)
		out, _ := exec.Command("ip", "-4", "-o", "addr", "show", "to", prefix+"/30").Output()
		if len(bytes.TrimSpace(out)) == 0 {
			break
		}
	}
	p := strings.Split(prefix, ".")
	last, _ := strconv.Atoi(p[3])
	local := fmt.Sprintf("%s.%s.%s.%d", p[0], p[1], p[2], last+1)
	remote := fmt.Sprintf("%s.%s.%s.%d", p[0], p[1], p[2], last+2)

	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "link", "add", hostIf, "type", "veth", "peer", "name", peerIf)
	t.Cleanup(func() { exec.Command("ip", "link", "del", hostIf).Run() })
	run(t, "ip", "link", "set", peerIf, "netns", ns)
	run(t, "ip", "addr", "add", local+"/30", "dev", hostIf)
	run(t, "ip", "link", "set", hostIf, "up")
	run(t, "ip", "-n", ns, "addr", "add", remote+"/30", "dev", peerIf)
	run(t, "ip", "-n", ns, "link", "set", peerIf, "up")
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")

	h := &testHost{addr: remote, port: 8080, udp: 9999}
	// Sockets made in the namespace stay in it.
	var s struct {
		ln net.Listener
		pc net.PacketConn
	}
	err := inNetns(ns, func() error {
		var err error
		if s.ln, err = net.Listen("tcp4", net.JoinHostPort(remote, strconv.Itoa(h.port))); err != nil {
			return err
		}
		// An IPv6 socket's connection to ::ffff:addr reaches this
		// listener too.
		s.pc, err = net.ListenPacket("udp4", net.JoinHostPort(remote, strconv.Itoa(h.udp)))
		return err
	})
	if err != nil {
		t.Fatalf("test host: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var extra []net.Listener // /listen's, closed with the host
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/listen" {
			io.WriteString(w, "test-host\n")
			return
		}
		// An attacker's server on a port the session names (its
		// proxy's port number), answering "proxy-port".
		port, err := strconv.Atoi(r.URL.Query().Get("port"))
		if err != nil || port <= 0 || port > 65535 {
			http.Error(w, "bad port", http.StatusBadRequest)
			return
		}
		ln, err := listenIn(ns, net.JoinHostPort(remote, strconv.Itoa(port)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		mu.Lock()
		extra = append(extra, ln)
		mu.Unlock()
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "proxy-port\n")
				c.Close()
			}
		})
		io.WriteString(w, "listening\n")
	}), ReadHeaderTimeout: 5 * time.Second}
	wg.Go(func() { srv.Serve(s.ln) })
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := s.pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.pc.WriteTo(buf[:n], from)
		}
	})
	t.Cleanup(func() {
		srv.Close()
		s.pc.Close()
		mu.Lock()
		for _, ln := range extra {
			ln.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return h
}

// listenIn listens on addr inside the network namespace ns.
func listenIn(ns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetns(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	return ln, err
}

// inNetns runs f on a thread in the network namespace ns, then moves the
// thread back. A thread is never left to die locked: this process starts
// its kits with Pdeathsig, which the kernel sends when the thread that
// forked them exits, whatever the rest of the process does.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer own.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		// Stuck in the namespace: the thread must not serve anything
		// else. Kits forked from it get their Pdeathsig, which the
		// test then reports; better than a thread in the wrong place.
		return errors.Join(ferr, fmt.Errorf("setns back: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}
