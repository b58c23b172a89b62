package egress

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

func FuzzReadSOCKS(f *testing.F) {
	f.Add([]byte("\x05\x01\x00\x05\x01\x00\x03\x09echo.test\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x16"))
	f.Add([]byte("\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x16"))
	f.Add([]byte("\x05\x01\x02"))
	f.Add([]byte("\x05\x01\x00\x05\x02\x00\x09"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var w bytes.Buffer
		req, err := readSOCKS(bytes.NewReader(data), &w)
		if err != nil {
			return
		}
		if req.port < 0 || req.port > 65535 || w.Len() != 2 {
			t.Fatalf("readSOCKS(%q) = %+v, wrote %q", data, req, w.Bytes())
		}
	})
}

// FuzzServeConn feeds arbitrary bytes to a proxy connection, as an agent
// may: HTTP requests, CONNECTs and SOCKS greetings, whole or broken. It
// must answer or close, never panic or hang.
func FuzzServeConn(f *testing.F) {
	for _, s := range []string{
		"GET http://outside.test/ HTTP/1.1\r\nHost: outside.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT api.outside.test:443 HTTP/1.1\r\nHost: api.outside.test:443\r\n\r\n",
		"CONNECT [::1]:22 HTTP/1.1\r\n\r\n",
		"POST http://10.0.0.1:99999/ HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
		"\x05\x01\x00\x05\x01\x00\x03\x09echo.test\x00\x50",
		"\x05\x01\x00\x05\x03\x00\x01\x01\x02\x03\x04\x00\x50",
		"GET http://169.254.169.254/ HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	pol, err := NewPolicy(protocol.NetworkSpec{Default: "allow", Deny: []string{"evil.test"},
		AllowRequests: []protocol.RequestRule{{Host: "outside.test", Methods: []string{"GET"}, Paths: []string{"/a/"}}}})
	if err != nil {
		f.Fatal(err)
	}
	p, err := New(Options{
		Policy: pol, Guard: testGuard,
		Secrets: []Secret{{Name: "K", Value: "v", Hosts: []string{"api.outside.test"}, Header: "x-api-key"}},
		Resolve: fakeDNS(map[string][]string{"outside.test": {"203.0.113.1"}, "api.outside.test": {"203.0.113.2"}}),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, errors.New("fuzz: no upstream")
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer server.Close()
			newHandler(p, Session{ID: "fuzz"}, ctx, server).serve()
		}()
		client.Write(data)
		client.(*net.TCPConn).CloseWrite()
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, client)
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("the proxy still served %q 10s after the client finished writing", data)
		}
	})
}

// FuzzRequestDecision: whatever the method, path and rule, a request
// rules allow has a clean path under the rule's prefix, at a segment
// boundary, and a method the rule lists; session rules only narrow it.
func FuzzRequestDecision(f *testing.F) {
	f.Add("GET", "/repos/acme/x", "/repos/acme/", "GET", "/repos/")
	f.Add("GET", "/repos/acme/..%2fother", "/repos/acme/", "GET", "/")
	f.Add("POST", "/repos/acme%2Fx", "/repos/acme", "", "/repos/acme/x")
	f.Add("GET", "//x", "/", "", "/")
	f.Fuzz(func(t *testing.T, method, escaped, prefix, ruleMethod, sessPrefix string) {
		r := protocol.RequestRule{Host: "h.test", Paths: []string{prefix}}
		if ruleMethod != "" {
			r.Methods = []string{ruleMethod}
		}
		box, err := NewPolicy(protocol.NetworkSpec{AllowRequests: []protocol.RequestRule{r}})
		if err != nil {
			return
		}
		d := rules{box: box}.request("h.test", 443, method, escaped)
		if d.Allowed() {
			path, err := protocol.CleanRequestPath(escaped)
			if escaped == "" && method != "CONNECT" {
				path, err = "/", nil
			}
			if err != nil {
				t.Fatalf("%s %q allowed, but its path is ambiguous: %v", method, escaped, err)
			}
			if !protocol.MatchPath(prefix, path) || (ruleMethod != "" && method != ruleMethod) {
				t.Fatalf("%s %q (%q) allowed by %s", method, escaped, path, r)
			}
		}
		sess, err := NewSessionPolicy(protocol.NetworkSpec{AllowRequests: []protocol.RequestRule{{Host: "h.test", Paths: []string{sessPrefix}}}})
		if err != nil || sess == nil {
			return
		}
		if sd := (rules{box: box, sess: sess}).request("h.test", 443, method, escaped); sd.Allowed() && !d.Allowed() {
			t.Fatalf("session rules widened a request: %s %q", method, escaped)
		}
	})
}
