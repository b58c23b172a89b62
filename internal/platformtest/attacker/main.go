//go:build linux

// Command attacker is the hostile program the platform tests run inside a
// box's session: a static binary that tries, with real system calls, what
// an agent under prompt injection would try, and prints one line per
// attempt that succeeded ("BREACH what pid name") and a summary line.
// It is built by the tests and installed in their containers; it is no
// part of any image.
//
//	attacker scan -key KEY -session ID -victim TEXT -secret TEXT the key in /proc/*/environ, the kit's and supervisors' memory, ptrace, signals, another session's command line
//	attacker net -host IP -port N -udp N              direct TCP, UDP, raw ICMP and IPv6 past the proxy; then the same host through it
//	attacker ns                                       a user namespace (root inside it, the way into the kernel's namespaced code), and a mount namespace
//	attacker fork N                                   start up to N processes that sleep
//	attacker mem MB                                   allocate and touch up to MB MiB
//	attacker disk DIR FILES MB                        write FILES files of MB MiB each
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attacker scan|net|fork|mem|disk ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "scan":
		err = scan(os.Args[2:])
	case "net":
		err = netAttack(os.Args[2:])
	case "ns":
		err = newNamespaces()
	case "fork":
		err = forkBomb(os.Args[2:])
	case "mem":
		err = memBomb(os.Args[2:])
	case "disk":
		err = diskBomb(os.Args[2:])
	default:
		err = fmt.Errorf("unknown attack %q", os.Args[1])
	}
	if err != nil {
		fmt.Println("attacker:", err)
		os.Exit(1)
	}
}

type proc struct {
	pid     int
	ppid    int
	cmdline string
	environ []byte
	envErr  error
}

func readProcs() map[int]*proc {
	out := map[int]*proc{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p := &proc{pid: pid}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		p.cmdline = string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		p.environ, p.envErr = os.ReadFile("/proc/" + e.Name() + "/environ")
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i >= 0 {
				f := strings.Fields(string(st[i+1:]))
				if len(f) > 1 {
					p.ppid, _ = strconv.Atoi(f[1])
				}
			}
		}
		out[pid] = p
	}
	return out
}

// role names what a process is to the attacker: the kit, a sandbox
// supervisor, the victim session's prompt, or "" for anything else.
func role(p *proc, marker string) string {
	first, _, _ := strings.Cut(p.cmdline, " ")
	base := filepath.Base(first)
	switch {
	case base == "glovebox-sandbox-init":
		return "supervisor"
	case base == "glovebox-kit" || base == "gbx":
		return "kit"
	case marker != "" && strings.Contains(p.cmdline, marker):
		return "victim"
	}
	return ""
}

func scan(args []string) error {
	fs := flag.NewFlagSet("scan", flag.ContinueOnError)
	key := fs.String("key", "", "the box key to look for")
	session := fs.String("session", "", "this session's id")
	victim := fs.String("victim", "", "text in the command line of the victim session's processes")
	secret := fs.String("secret", "", "text in the victim's prompt that none of its processes' command lines may show")
	if err := fs.Parse(args); err != nil {
		return err
	}
	procs := readProcs()
	// The attacker's own chain, up to its session's supervisor, is its
	// own: not a target.
	own := map[int]bool{os.Getpid(): true}
	for pid := os.Getppid(); pid > 0; {
		p := procs[pid]
		if p == nil {
			break
		}
		own[pid] = true
		if role(p, "") == "supervisor" {
			break
		}
		pid = p.ppid
	}
	targets := 0
	for pid, p := range procs {
		// The attacker's own chain holds the key: the prompt that runs it
		// passed it. Any other process that shows it leaks it.
		if p.envErr == nil && !own[pid] {
			if *key != "" && bytes.Contains(p.environ, []byte(*key)) || bytes.Contains(p.environ, []byte("GLOVEBOX_KEY=")) {
				fmt.Printf("BREACH key-environ %d %s\n", pid, short(p.cmdline))
			}
			for _, kv := range bytes.Split(p.environ, []byte{0}) {
				if id, ok := bytes.CutPrefix(kv, []byte("GLOVEBOX_SESSION=")); ok && string(id) != *session {
					fmt.Printf("BREACH cross-environ %d %s\n", pid, short(p.cmdline))
				}
			}
		}
		if *secret != "" && !own[pid] && strings.Contains(p.cmdline, *secret) {
			fmt.Printf("BREACH cmdline-visible %d %s\n", pid, short(p.cmdline))
		}
		r := role(p, *victim)
		if r == "" || own[pid] {
			continue
		}
		targets++
		if f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid)); err == nil {
			f.Close()
			fmt.Printf("BREACH mem-%s %d %s\n", r, pid, short(p.cmdline))
		}
		// PTRACE_SEIZE does not stop the tracee; the tracer's exit
		// detaches it.
		if err := unix.PtraceSeize(pid); err == nil {
			fmt.Printf("BREACH ptrace-%s %d %s\n", r, pid, short(p.cmdline))
		}
		if err := unix.Kill(pid, 0); err == nil {
			fmt.Printf("BREACH signal-%s %d %s\n", r, pid, short(p.cmdline))
		}
	}
	fmt.Printf("scan-done procs=%d targets=%d\n", len(procs), targets)
	return nil
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

func netAttack(args []string) error {
	fs := flag.NewFlagSet("net", flag.ContinueOnError)
	host := fs.String("host", "", "the test host's address (198.18.0.0/15)")
	port := fs.Int("port", 0, "its TCP port")
	udp := fs.Int("udp", 0, "its UDP echo port")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ip := net.ParseIP(*host).To4()
	if ip == nil || !(ip[0] == 198 && (ip[1] == 18 || ip[1] == 19)) {
		return fmt.Errorf("host %q is not in 198.18.0.0/15", *host)
	}
	tcp := net.JoinHostPort(*host, strconv.Itoa(*port))
	d := net.Dialer{Timeout: 2 * time.Second}
	if c, err := d.Dial("tcp4", tcp); err == nil {
		c.Close()
		fmt.Println("BREACH egress-tcp")
	} else {
		fmt.Println("tcp:", err)
	}
	if err := connect6(ip, *port); err == nil {
		fmt.Println("BREACH egress-ipv6")
	} else {
		fmt.Println("tcp6:", err)
	}
	if err := udpEcho(*host, *udp); err == nil {
		fmt.Println("BREACH egress-udp")
	} else {
		fmt.Println("udp:", err)
	}
	if err := ping(ip); err == nil {
		fmt.Println("BREACH egress-raw")
	} else {
		fmt.Println("raw:", err)
	}
	// The same host through the proxy the session is told about.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+tcp+"/", nil)
	cl := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	resp, err := cl.Do(req)
	if err != nil {
		fmt.Println("PROXY-FAIL", err)
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if proxied := os.Getenv("HTTP_PROXY") != ""; proxied && resp.StatusCode == 200 && strings.Contains(string(body), "test-host") {
		fmt.Println("PROXY-OK")
	} else {
		fmt.Printf("PROXY-FAIL proxy=%q %d %q\n", os.Getenv("HTTP_PROXY"), resp.StatusCode, body)
		return nil
	}
	// A server of the attacker's on the proxy's port number: asked
	// through the proxy to listen there, then dialled directly.
	if err := proxyPortHost(ctx, cl, *host, tcp); err == nil {
		fmt.Println("BREACH egress-proxy-port")
	} else {
		fmt.Println("proxy port:", err)
	}
	return nil
}

// proxyPortHost asks the test host, through the proxy, to listen on the
// port number of the session's proxy, and connects there directly.
func proxyPortHost(ctx context.Context, cl *http.Client, host, hostPort string) error {
	u, err := url.Parse(os.Getenv("HTTP_PROXY"))
	if err != nil || u.Port() == "" {
		return fmt.Errorf("no proxy port in HTTP_PROXY=%q", os.Getenv("HTTP_PROXY"))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostPort+"/listen?port="+u.Port(), nil)
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("the test host could not listen on %s: %s", u.Port(), resp.Status)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(host, u.Port()))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(io.LimitReader(c, 64))
	if err != nil || !strings.Contains(string(b), "proxy-port") {
		return fmt.Errorf("connected, but read %q, %v", b, err)
	}
	return nil
}

// connect6 connects an IPv6 TCP socket to the IPv4-mapped ip: the
// family a filter that only thinks of AF_INET forgets. (Go's net refuses
// a mapped address for tcp6, so the system calls are made here.)
func connect6(ip net.IP, port int) error {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	// Linux bounds a blocking connect by the send timeout.
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	sa := &unix.SockaddrInet6{Port: port}
	copy(sa.Addr[:], ip.To16())
	if err := unix.Connect(fd, sa); err != nil {
		return fmt.Errorf("connect [::ffff:%s]:%d: %w", ip, port, err)
	}
	return nil
}

func udpEcho(host string, port int) error {
	c, err := net.Dial("udp4", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("udp-probe")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "udp-probe" {
		return fmt.Errorf("echo %q", buf[:n])
	}
	return nil
}

// ping sends one ICMP echo request on a raw socket and waits for the
// reply.
func ping(ip net.IP) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	msg := []byte{8, 0, 0, 0, 0x12, 0x34, 0, 1, 'g', 'b'}
	var sum uint32
	for i := 0; i < len(msg); i += 2 {
		sum += uint32(msg[i])<<8 | uint32(msg[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	msg[2], msg[3] = byte(^sum>>8), byte(^sum)
	sa := &unix.SockaddrInet4{}
	copy(sa.Addr[:], ip)
	if err := unix.Sendto(fd, msg, 0, sa); err != nil {
		return fmt.Errorf("sendto: %w", err)
	}
	buf := make([]byte, 1500)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("recvfrom: %w", err)
		}
		// IP header, then ICMP type 0 (echo reply).
		if n > 20 {
			hl := int(buf[0]&0x0f) * 4
			if n > hl && buf[hl] == 0 {
				return nil
			}
		}
	}
	return errors.New("no reply")
}

// newNamespaces tries, in a child that exits at once, to make a user
// namespace and a mount namespace: a session gets namespaces only from
// the sandbox, never of its own making.
func newNamespaces() error {
	for _, ns := range []struct {
		name  string
		flags uintptr
	}{{"userns", unix.CLONE_NEWUSER}, {"mountns", unix.CLONE_NEWUSER | unix.CLONE_NEWNS}} {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: ns.flags}
		if err := cmd.Run(); err == nil {
			fmt.Printf("BREACH new-%s\n", ns.name)
		} else {
			fmt.Printf("%s: %v\n", ns.name, err)
		}
	}
	return nil
}

func forkBomb(args []string) error {
	if len(args) != 1 {
		return errors.New("fork N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	started := 0
	var last error
	for i := 0; i < n; i++ {
		cmd := exec.Command("sleep", "15")
		if err := cmd.Start(); err != nil {
			last = err
			break
		}
		started++
		go cmd.Wait()
	}
	fmt.Printf("FORKED %d (%v)\n", started, last)
	return nil
}

func memBomb(args []string) error {
	if len(args) != 1 {
		return errors.New("mem MB")
	}
	mb, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	var keep [][]byte
	for got := 0; got < mb; got += 16 {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		fmt.Printf("ALLOCATED %d\n", got+16)
	}
	fmt.Printf("MEM-DONE %d\n", len(keep)*16)
	return nil
}

func diskBomb(args []string) error {
	if len(args) != 3 {
		return errors.New("disk DIR FILES MB")
	}
	files, err1 := strconv.Atoi(args[1])
	mb, err2 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	// A file over RLIMIT_FSIZE gets EFBIG, not death: the next file is
	// tried, as an attacker would.
	signal.Ignore(unix.SIGXFSZ)
	chunk := bytes.Repeat([]byte("d"), 1<<20)
	var total int64
	var last error
	for i := 0; i < files && last == nil; i++ {
		f, err := os.Create(filepath.Join(args[0], fmt.Sprintf("bomb-%d", i)))
		if err != nil {
			last = err
			break
		}
		for j := 0; j < mb; j++ {
			n, err := f.Write(chunk)
			total += int64(n)
			if err != nil {
				last = err
				break
			}
		}
		f.Close()
	}
	fmt.Printf("WROTE %d (%v)\n", total, last)
	return nil
}
