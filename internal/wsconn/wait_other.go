//go:build !linux

package wsconn

import "net"

// waitReadable does not wait where the one-byte peek is not written: the
// frame read then waits instead.
func waitReadable(net.Conn) error { return nil }

// parkEmpty never parks where the one-byte peek is not written.
func parkEmpty(net.Conn, func(fd uintptr) bool) (empty, parked bool) { return true, false }
