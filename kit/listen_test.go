package kit

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzSpareAnswer feeds whatever a client may send to a connection over
// the cap: the spare slot must never panic, and whatever it answers is a
// well-formed HTTP response, 200 only for /health.
func FuzzSpareAnswer(f *testing.F) {
	for _, s := range []string{
		"GET /health HTTP/1.1\r\nHost: b\r\n\r\n",
		"HEAD /health HTTP/1.1\r\nHost: b\r\n\r\n",
		"GET /environment HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer x\r\n\r\n",
		"POST /health HTTP/1.1\r\nHost: b\r\nContent-Length: 3\r\n\r\nabc",
		"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
		"\x00\x01garbage",
		"GET /health?x=%zz HTTP/1.0\r\n\r\n",
	} {
		f.Add(s)
	}
	health := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	f.Fuzz(func(t *testing.T, req string) {
		g := newGate(nil, 1, health, slog.New(slog.DiscardHandler))
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		g.spare <- struct{}{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.answerSpare(server)
		}()
		client.SetDeadline(time.Now().Add(10 * time.Second))
		client.Write([]byte(req))
		client.(*net.TCPConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(client), nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && !strings.Contains(req, "/health") {
				t.Errorf("request %q answered 200, want 503 for anything but /health", req)
			}
			if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("request %q answered %s", req, resp.Status)
			}
		}
		client.Close()
		<-done
	})
}
