package netguard

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// listeningPorts returns the ports this process listens on over TCP: the
// listening sockets of /proc/self/net/tcp and tcp6 whose inodes are among
// the process's open descriptors.
func listeningPorts() ([]int, error) {
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
