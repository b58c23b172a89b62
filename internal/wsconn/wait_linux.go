package wsconn

import (
	"net"
	"syscall"
	"unsafe"
)

// waitReadable waits for nc to be readable. The runtime's poller is
// edge-triggered, so it may wait only after seeing the socket empty: a
// one-byte peek that fails with EAGAIN proves it, and any other answer
// (bytes, end of stream, an error) returns for the real read to meet.
func waitReadable(nc net.Conn) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc.Read(peekEmpty)
}

func peekEmpty(fd uintptr) bool {
	var b [1]byte
	_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno != syscall.EAGAIN
}
