package kit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// flyProxy stands in for Fly's proxy in front of an app's machines: it
// sends each request to the next machine in turn and honours the
// fly-replay response header as Fly documents it (instance=<machine>):
// the response is dropped and the same request is sent to that machine,
// once, with a fly-replay-src header. WebSocket upgrades are replayed the
// same way before the tunnel is set up.
type flyProxy struct {
	t        *testing.T
	machines []string          // in the order requests go round
	addrs    map[string]string // machine -> host:port
	mu       sync.Mutex
	next     int
	replays  []string // "from->to path"
	wg       sync.WaitGroup
}

func (p *flyProxy) pick() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.machines[p.next%len(p.machines)]
	p.next++
	return m
}

// setNext makes machine the next pick.
func (p *flyProxy) setNext(machine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.machines {
		if m == machine {
			p.next = i
		}
	}
}

func (p *flyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	machine, src := p.pick(), ""
	for hop := 0; ; hop++ {
		conn, br, resp, err := p.send(r, machine, src)
		if err != nil {
			http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
			return
		}
		if replay := resp.Header.Get("Fly-Replay"); replay != "" && hop == 0 {
			resp.Body.Close()
			conn.Close()
			to, ok := strings.CutPrefix(replay, "instance=")
			if _, known := p.addrs[to]; !ok || !known {
				http.Error(w, "proxy: bad fly-replay "+replay, http.StatusBadGateway)
				return
			}
			p.mu.Lock()
			p.replays = append(p.replays, machine+"->"+to+" "+r.URL.Path)
			p.mu.Unlock()
			src = "instance=" + machine + ";region=test;t=1"
			machine = to
			continue
		}
		p.relay(w, conn, br, resp)
		return
	}
}

// send writes r to machine over a new connection and reads the response
// head through br, which holds whatever the machine sent after it.
func (p *flyProxy) send(r *http.Request, machine, src string) (net.Conn, *bufio.Reader, *http.Response, error) {
	conn, err := net.Dial("tcp", p.addrs[machine])
	if err != nil {
		return nil, nil, nil, err
	}
	out := r.Clone(context.Background())
	out.RequestURI = ""
	out.URL = &url.URL{Scheme: "http", Host: p.addrs[machine], Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	out.Header.Del("Fly-Replay-Src") // clients cannot forge it
	if src != "" {
		out.Header.Set("Fly-Replay-Src", src)
	}
	if err := out.Write(conn); err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, out)
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	return conn, br, resp, nil
}

// relay passes the response on: a body as is, a 101 as a tunnel.
func (p *flyProxy) relay(w http.ResponseWriter, conn net.Conn, br *bufio.Reader, resp *http.Response) {
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	client, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		conn.Close()
		return
	}
	fmt.Fprintf(client, "HTTP/1.1 101 Switching Protocols\r\n")
	resp.Header.Write(client)
	io.WriteString(client, "\r\n")
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		io.Copy(conn, buf)
		conn.Close()
	}()
	go func() {
		defer p.wg.Done()
		io.Copy(client, br)
		client.Close()
	}()
}

// twoMachines boots two kits with one manifest and key, as two Fly
// machines of one app, behind a flyProxy.
func twoMachines(t *testing.T, ag agent.Agent) (*flyProxy, string, string) {
	key := protocol.NewKey()
	p := &flyProxy{t: t, machines: []string{"a1a1", "b2b2"}, addrs: map[string]string{}}
	front := httptest.NewServer(p)
	t.Cleanup(func() {
		front.Close()
		p.wg.Wait()
	})
	var servers []*Server
	var backends []*httptest.Server
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i, srv := range servers {
			if err := srv.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
			backends[i].Close()
		}
		checkLeaks(t)
	})
	for _, m := range p.machines {
		srv, err := New(Options{Manifest: testManifest(key), Key: key, Root: t.TempDir(), Agent: ag,
			Logger: testLogger(t), PublicURL: front.URL, Getenv: func(k string) string {
				if k == "FLY_MACHINE_ID" {
					return m
				}
				return ""
			}})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		ts := httptest.NewServer(srv.Handler())
		servers, backends = append(servers, srv), append(backends, ts)
		p.addrs[m] = strings.TrimPrefix(ts.URL, "http://")
	}
	return p, front.URL, key
}

// TestFlyReplay runs two real kits as two Fly machines behind a proxy that
// honours fly-replay: a session made on one machine resumes through a
// request the proxy first sends to the other, and its server-parked file
// downloads the same way; ids carry their machine.
func TestFlyReplay(t *testing.T) {
	const size = 2 << 20
	release := make(chan struct{})
	ag := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		data := []byte(strings.Repeat("x", size))
		if err := os.WriteFile(filepath.Join(turn.Session().Dirs.Output, "big.bin"), data, 0o644); err != nil {
			return "", err
		}
		turn.Emit("text_delta", map[string]string{"text": "written"})
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "done", nil
	})
	p, front, key := twoMachines(t, ag)
	auth := http.Header{"Authorization": {"Bearer " + key}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(front, "http")

	p.setNext("a1a1")
	c1, _, err := wsconn.Dial(ctx, ws+"/", wsconn.DialOptions{Header: auth})
	if err != nil {
		t.Fatalf("dial through the proxy: %v", err)
	}
	read := func(c *wsconn.Conn, what string) map[string]any {
		t.Helper()
		type res struct {
			m   map[string]any
			err error
		}
		ch := make(chan res, 1)
		go func() {
			data, err := c.ReadMessage()
			var m map[string]any
			if err == nil {
				err = json.Unmarshal(data, &m)
			}
			ch <- res{m, err}
		}()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("waiting for %s: %v", what, r.err)
			}
			return r.m
		case <-ctx.Done():
			t.Fatalf("no %s within the test's deadline", what)
			return nil
		}
	}
	hello := read(c1, "the hello")
	sid, _ := hello["session_id"].(string)
	if !strings.HasPrefix(sid, "a1a1_") {
		t.Fatalf("session id %q does not carry its machine a1a1", sid)
	}
	c1.WriteText([]byte(`{"type":"hello","capabilities":["resume"]}`))
	c1.WriteText([]byte(`{"type":"prompt","id":"p","text":"go"}`))
	if ev := read(c1, "the first event"); ev["type"] != "event" {
		t.Fatalf("first frame after the prompt = %v", ev)
	}
	c1.Close() // dropped mid-prompt: the session waits for a resume on a1a1
	close(release)

	p.setNext("b2b2") // the reconnect lands on the other machine
	c2, _, err := wsconn.Dial(ctx, ws+"/?resume="+sid+"&last_seq=1", wsconn.DialOptions{Header: auth})
	if err != nil {
		t.Fatalf("resume through the proxy: %v", err)
	}
	defer c2.Close()
	h2 := read(c2, "the resumed hello")
	if h2["resumed"] != true || h2["session_id"] != sid {
		t.Fatalf("resume on the other machine: hello %v", h2)
	}
	var done map[string]any
	for done == nil {
		if m := read(c2, "the complete"); m["type"] == "complete" {
			done = m
		}
	}
	ref, _ := done["outputs"].(map[string]any)["big.bin"].(map[string]any)
	id, _ := ref["id"].(string)
	if ref["kind"] != "server" || !strings.HasPrefix(id, "a1a1_") || ref["url"] != front+"/files/"+id {
		t.Fatalf("big.bin ref = %v, want a server ref whose id carries a1a1, under the public URL", ref)
	}

	p.setNext("b2b2") // the download too
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front+"/files/"+id, nil)
	req.Header = auth
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != size {
		t.Errorf("GET /files/%s through the proxy = %d with %d bytes, want 200 with %d", id, resp.StatusCode, len(body), size)
	}

	p.mu.Lock()
	want := []string{"b2b2->a1a1 /", "b2b2->a1a1 /files/" + id}
	if fmt.Sprint(p.replays) != fmt.Sprint(want) {
		t.Errorf("replays = %q, want %q", p.replays, want)
	}
	p.mu.Unlock()
}

// TestFlyReplayOnce: a request Fly has already replayed is served where it
// lands (404 here), never sent on again; an id of this machine, or without
// a machine, is served here.
func TestFlyReplayOnce(t *testing.T) {
	const machine = "a1a1"
	for _, tc := range []struct {
		path, src, want string
	}{
		{"/files/b2b2_x", "", "instance=b2b2"},
		{"/files/b2b2_x", "instance=b2b2", ""},
		{"/files/a1a1_x", "", ""},
		{"/files/plain-uuid", "", ""},
		{"/files/Bad_x", "", ""},
		{"/sessions/b2b2_x/previews", "", "instance=b2b2"},
		{"/sessions/b2b2_x/previews", "instance=b2b2", ""},
		{"/sessions/a1a1_x/previews/abc", "", ""},
		{"/health", "", ""},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.src != "" {
			r.Header.Set(FlyReplaySrcHeader, tc.src)
		}
		w := httptest.NewRecorder()
		replayed := replayElsewhere(w, r, machine)
		if got := w.Header().Get(FlyReplayHeader); got != tc.want || replayed != (tc.want != "") {
			t.Errorf("%s (src %q): fly-replay %q (replayed %v), want %q", tc.path, tc.src, got, replayed, tc.want)
		}
	}
}
