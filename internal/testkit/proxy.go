package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on loopback towards to, for tests that slow or cut
// a connection. Each connection it accepts is dialled through to to: what
// comes back reaches the client as is, and what goes up passes through
// upstream, which copies from down to up as it likes and returns when it
// is done; both sides are closed then. The listener, the connections and
// their goroutines end with the test.
func Proxy(t testing.TB, to string, upstream func(down, up net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				down.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, down, up)
			mu.Unlock()
			wg.Go(func() { io.Copy(down, up); down.Close() })
			wg.Go(func() {
				defer down.Close()
				defer up.Close()
				upstream(down, up)
			})
		}
	})
	return ln
}
