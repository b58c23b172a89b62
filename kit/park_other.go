//go:build !linux

package kit

import "errors"

// parker parks idle connections only on Linux (park_linux.go); elsewhere
// every connection keeps its reader goroutine.
type parker struct{}

func newParker(func(*conn)) (*parker, error) {
	return nil, errors.New("kit: parking idle connections needs Linux")
}

func (*parker) park(*conn, uintptr) bool { return false }
func (*parker) wake(*conn)               {}
func (*parker) stop()                    {}
func (*parker) parkedCount() int         { return 0 }
