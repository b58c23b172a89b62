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

func peekEmpty(fd uintptr) bool { return !sockEmpty(fd) }

// sockEmpty reports whether a one-byte peek finds the socket empty
// (EAGAIN); bytes, the end of the stream and errors are not empty.
func sockEmpty(fd uintptr) bool {
	var b [1]byte
	_, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno == syscall.EAGAIN
}

// parkEmpty calls register with nc's descriptor when the socket is empty.
// empty reports that it was (register called or not), parked what
// register returned. A socket it cannot reach counts as empty and
// unparked, so the caller waits as before.
func parkEmpty(nc net.Conn, register func(fd uintptr) bool) (empty, parked bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true, false
	}
	err = rc.Control(func(fd uintptr) {
		if empty = sockEmpty(fd); empty {
			parked = register(fd)
		}
	})
	if err != nil {
		return true, false // closed: the wait that follows meets it
	}
	return empty, parked
}
