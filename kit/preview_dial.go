package kit

import (
	"context"
	"net"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// dialSessionHelper connects to port on the session's loopback through
// its helper (kit/sandbox): inside its network namespace, as the session.
// The helper bounds its connect (a few seconds); ctx ending first returns
// at once, and the socket that comes later is closed.
func dialSessionHelper(ctx context.Context, box *sandbox.Session, port int) (net.Conn, error) {
	h, err := box.Helper()
	if err != nil {
		return nil, err
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		f, err := h.Dial(port)
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer f.Close()
		c, err := net.FileConn(f)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true) // as net.Dial's connections are: no Nagle delay on small writes
		}
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
