package kit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// Preview ports where sessions share the host's loopback (mode "port",
// preview.go): one port per session, from a range.

// defaultPreviewPorts is the range sessions' ports come from, below
// Linux's ephemeral ports (32768-60999), where the kit's own connections
// and the egress proxy's listeners take theirs.
const defaultPreviewPorts = "20000-29999"

// previewPorts hands out the sessions' ports, round robin, so that a port
// is taken again as late as possible after its session ended.
type previewPorts struct {
	lo, hi int
	mu     sync.Mutex
	next   int
	used   map[int]bool
}

// parsePreviewPorts reads "LO-HI" ("" is the default range).
func parsePreviewPorts(v string) (*previewPorts, error) {
	if v == "" {
		v = defaultPreviewPorts
	}
	a, b, ok := strings.Cut(strings.TrimSpace(v), "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1024 || hi > 65535 || lo > hi {
		return nil, fmt.Errorf("%q is not a port range: want LO-HI within 1024-65535, such as %q", v, defaultPreviewPorts)
	}
	return &previewPorts{lo: lo, hi: hi, next: lo, used: map[int]bool{}}, nil
}

// take returns a free port of the range: none in use by a session, and
// none anything on the host listens on now.
func (pp *previewPorts) take() (int, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for range pp.hi - pp.lo + 1 {
		port := pp.next
		if pp.next++; pp.next > pp.hi {
			pp.next = pp.lo
		}
		if pp.used[port] || !portFree(port) {
			continue
		}
		pp.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("every preview port (%d-%d, GLOVEBOX_PREVIEW_PORTS) is taken", pp.lo, pp.hi)
}

func (pp *previewPorts) give(port int) {
	pp.mu.Lock()
	delete(pp.used, port)
	pp.mu.Unlock()
}

// portFree reports whether nothing listens on port of 127.0.0.1 now.
func portFree(port int) bool {
	l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// sessionPort gives the session its port, before its first command (the
// sandbox's ListenPort must be set before the supervisor starts), and
// returns its environment: PORT and GLOVEBOX_PREVIEW_PORT. The port goes
// back when the session ends.
func (p *previews) sessionPort(ss *session, box *sandbox.Session) ([]string, error) {
	if p == nil || p.ports == nil {
		return nil, nil
	}
	port, err := p.ports.take()
	if err != nil {
		return nil, err
	}
	box.ListenPort = port
	context.AfterFunc(ss.ctx, func() { p.ports.give(port) })
	v := strconv.Itoa(port)
	return []string{"PORT=" + v, "GLOVEBOX_PREVIEW_PORT=" + v}, nil
}

// portDial connects to the session's own port on the host's loopback and
// checks, where the session has a uid of its own, that the socket that
// accepted the connection is that uid's.
func (p *previews) portDial(ctx context.Context, ss *session, port int) (net.Conn, error) {
	info, err := ss.sandboxed()
	if err != nil {
		return nil, err
	}
	if own := info.Sandbox.ListenPort; port != own {
		return nil, fmt.Errorf("port %d is not the session's (%d)", port, own)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		c, err = d.DialContext(ctx, "tcp6", "[::1]:"+strconv.Itoa(port))
	}
	if err != nil {
		return nil, err
	}
	uid := info.Sandbox.UID()
	if uid < 0 {
		// Sessions run as the kit's uid: Landlock alone keeps the port
		// theirs (newPreviews requires it then).
		return c, nil
	}
	local := c.LocalAddr().(*net.TCPAddr)
	owner, err := acceptedBy(port, local.Port)
	for i := 0; errors.Is(err, errNoSocket) && i < 5; i++ {
		// The server's end is made when the handshake completes, on
		// loopback by the time connect returns, almost always.
		time.Sleep(time.Millisecond)
		owner, err = acceptedBy(port, local.Port)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	if owner != uid {
		c.Close()
		return nil, fmt.Errorf("port %d is held by uid %d, not by the session (uid %d)", port, owner, uid)
	}
	return c, nil
}

// errNoSocket: /proc/net/tcp has no such connection.
var errNoSocket = errors.New("the connection's other end is not in /proc/net/tcp")

// acceptedBy returns the uid of the socket on the host's loopback whose
// local port is port and whose peer's port is peer: the server's end of
// a connection the kit made (an accepted socket carries its listener's
// uid).
func acceptedBy(port, peer int) (int, error) {
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, err := findSocket(f, port, peer)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, errNoSocket) {
			return 0, err
		}
	}
	return 0, errNoSocket
}

// findSocket reads one /proc/net/tcp file for the socket from port to
// peer. Lines: "sl local rem st ... uid ...", addresses "HEXIP:HEXPORT".
func findSocket(file string, port, peer int) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 4096)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		lp, ok1 := hexPort(fs[1])
		rp, ok2 := hexPort(fs[2])
		if !ok1 || !ok2 || lp != port || rp != peer || !loopbackHex(fs[2]) {
			continue
		}
		uid, err := strconv.Atoi(fs[7])
		if err != nil {
			return 0, fmt.Errorf("%s: uid %q", file, fs[7])
		}
		return uid, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	return 0, errNoSocket
}

// loopbackHex reports whether "HEXIP:HEXPORT" is 127.0.0.1, ::1 or
// ::ffff:127.0.0.1 as /proc/net/tcp{,6} write them.
func loopbackHex(addr string) bool {
	ip, _, _ := strings.Cut(addr, ":")
	switch ip {
	case "0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F":
		return true
	}
	return false
}

// hexPort is the port of "HEXIP:HEXPORT".
func hexPort(addr string) (int, bool) {
	_, h, ok := strings.Cut(addr, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(h, 16, 16)
	return int(n), err == nil
}
