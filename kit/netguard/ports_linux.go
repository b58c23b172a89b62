package netguard

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// listeningPorts returns the ports this process listens on over TCP: the
// listening sockets of its network namespace whose inodes are among the
// process's open descriptors. The kernel lists the listening sockets
// over netlink (sock_diag), filtered by state, in microseconds;
// /proc/net/tcp, the fallback, walks every bucket of the connection hash
// table and takes milliseconds on a machine with much memory.
func listeningPorts() ([]int, error) {
	inodes, err := socketInodes()
	if err != nil {
		return nil, err
	}
	if ports, err := diagListening(inodes); err == nil {
		return ports, nil
	}
	return procListening(inodes)
}

// socketInodes returns the inodes of the process's open sockets.
func socketInodes() (map[string]bool, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("read the kit's descriptors: %w", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue // closed since the listing
		}
		if in, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	return inodes, nil
}

// Sizes and offsets of the sock_diag messages (linux/inet_diag.h).
const (
	nlHdrLen       = 16
	diagReqLen     = 56 // inet_diag_req_v2
	diagMsgLen     = 72 // inet_diag_msg
	diagMsgSport   = 4  // id.idiag_sport, big-endian
	diagMsgInode   = 68
	tcpListenState = 10
)

// diagListening asks the kernel for the listening TCP sockets, IPv4 and
// IPv6, and returns the ports of those whose inodes are in inodes.
func diagListening(inodes map[string]bool) ([]int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("open a sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var ports []int
	buf := make([]byte, 64<<10)
	for i, family := range []byte{unix.AF_INET, unix.AF_INET6} {
		req := make([]byte, nlHdrLen+diagReqLen)
		ne := binary.NativeEndian
		ne.PutUint32(req[0:], uint32(len(req)))
		ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
		ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
		ne.PutUint32(req[8:], uint32(i+1))
		req[16], req[17] = family, unix.IPPROTO_TCP
		ne.PutUint32(req[20:], 1<<tcpListenState)
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return nil, fmt.Errorf("ask for the listening sockets: %w", err)
		}
	read:
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return nil, fmt.Errorf("read the listening sockets: %w", err)
			}
			msgs, err := syscall.ParseNetlinkMessage(buf[:n])
			if err != nil {
				return nil, fmt.Errorf("read the listening sockets: %w", err)
			}
			for _, m := range msgs {
				switch m.Header.Type {
				case unix.NLMSG_DONE:
					break read
				case unix.NLMSG_ERROR:
					return nil, errors.New("read the listening sockets: the kernel answered with an error")
				}
				if len(m.Data) < diagMsgLen {
					continue
				}
				inode := ne.Uint32(m.Data[diagMsgInode:])
				if inodes[strconv.FormatUint(uint64(inode), 10)] {
					ports = append(ports, int(binary.BigEndian.Uint16(m.Data[diagMsgSport:])))
				}
			}
		}
	}
	return ports, nil
}

// procListening reads /proc/self/net/tcp and tcp6.
func procListening(inodes map[string]bool) ([]int, error) {
	var ports []int
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6
			}
			return nil, fmt.Errorf("read the kit's sockets: %w", err)
		}
		ports = appendListening(ports, b, inodes)
	}
	return ports, nil
}

// appendListening adds the ports of the listening sockets of a
// /proc/net/tcp table whose inodes are in inodes.
func appendListening(ports []int, table []byte, inodes map[string]bool) []int {
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Buffer(make([]byte, 4096), 1<<20)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
			ports = append(ports, int(p))
		}
	}
	return ports
}
