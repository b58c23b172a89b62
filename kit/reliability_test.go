package kit

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// serveBox is newBox served by Server.Serve on a real listener, with the
// kit's own connection cap and timeouts.
func serveBox(t *testing.T, ag agent.Agent, opts ...boxOpt) *box {
	t.Helper()
	t.Cleanup(func() { checkLeaks(t) })
	key := protocol.NewKey()
	root := t.TempDir()
	m := testManifest(key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	o := Options{Manifest: m, Key: key, Root: root, Agent: ag, Logger: testLogger(t), Getenv: func(string) string { return "" }, PublicURL: url}
	for _, f := range opts {
		f(m, &o)
	}
	srv, err := New(o)
	if err != nil {
		ln.Close()
		t.Fatalf("New: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := testkit.Recv(t, served, "Serve to return after Close"); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &box{t: t, srv: srv, key: key, root: root, url: url, man: m}
}

// rawGet sends GET path on an open connection and reads the response.
func rawGet(t *testing.T, nc net.Conn, br *bufio.Reader, path string) (*http.Response, string) {
	t.Helper()
	nc.SetDeadline(time.Now().Add(testkit.Timeout))
	defer nc.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: box\r\n\r\n", path); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: read the response: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func dialRaw(t *testing.T, b *box) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", strings.TrimPrefix(b.url, "http://"), testkit.Timeout)
	if err != nil {
		t.Fatalf("dial the box: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(2 * testkit.Timeout)) // bounds every read and write of the test
	return nc
}

// TestIdleConnectionsCannotBlock opens many times more idle keep-alive
// connections than the cap allows, each after one unauthenticated GET
// /health, and checks that /health and a new session still work: the
// longest-idle connections make room.
func TestIdleConnectionsCannotBlock(t *testing.T) {
	const capConns, idle = 64, 2000
	b := serveBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxConnections = capConns })
	for i := range idle {
		nc := dialRaw(t, b)
		br := bufio.NewReader(nc)
		if resp, _ := rawGet(t, nc, br, "/health"); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /health on idle connection %d = %s, want 200", i, resp.Status)
		}
	}
	all, _ := b.srv.gateCount()
	if all > capConns {
		t.Errorf("%d connections admitted, want at most the cap %d", all, capConns)
	}
	resp, body := b.get("/health", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ok") {
		t.Errorf("GET /health after %d idle connections = %s %q, want 200", idle, resp.Status, body)
	}
	c := b.dial("/", nil)
	c.prompt("p", "echo hi")
	if m := last(c.finish("p")); m["type"] != "complete" || m["message"] != "hi\n" {
		t.Errorf("prompt on a new session after %d idle connections = %v", idle, m)
	}
	c.close()
}

// TestConnectionCapFull fills the cap with sessions, which are never
// closed to make room, and checks that /health is still answered while
// every other request gets a 503 saying why.
func TestConnectionCapFull(t *testing.T) {
	const capConns = 4
	b := serveBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxConnections = capConns })
	for range capConns {
		b.dial("/", nil)
	}
	testkit.Until(t, "the sessions to fill the cap", func() bool { all, _ := b.srv.gateCount(); return all == capConns })

	nc := dialRaw(t, b)
	resp, body := rawGet(t, nc, bufio.NewReader(nc), "/health")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("GET /health over a full cap = %s %q, want 200", resp.Status, body)
	}
	nc = dialRaw(t, b)
	resp, body = rawGet(t, nc, bufio.NewReader(nc), "/health/live")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("GET /health/live over a full cap = %s %q, want 200", resp.Status, body)
	}
	nc = dialRaw(t, b)
	resp, body = rawGet(t, nc, bufio.NewReader(nc), "/environment")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "limits.max_connections") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("GET /environment over a full cap = %s %q (Retry-After %q), want 503 naming limits.max_connections", resp.Status, body, resp.Header.Get("Retry-After"))
	}
}

// TestIdleTimeoutSet checks the server the kit runs closes idle
// keep-alive connections and bounds header reads.
func TestIdleTimeoutSet(t *testing.T) {
	if idleTimeout <= 0 || readHeaderTimeout <= 0 {
		t.Fatalf("idleTimeout %v, readHeaderTimeout %v: want both set", idleTimeout, readHeaderTimeout)
	}
}

// maskedHeader is a client frame header: a final text frame of n bytes
// with a zero mask.
func maskedHeader(n uint64) []byte {
	h := []byte{0x81, 0x80 | 127}
	h = binary.BigEndian.AppendUint64(h, n)
	return append(h, 0, 0, 0, 0)
}

// upgradeRaw opens a WebSocket by hand on a raw connection.
func upgradeRaw(t *testing.T, b *box) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc := dialRaw(t, b)
	nc.SetDeadline(time.Now().Add(testkit.Timeout))
	fmt.Fprintf(nc, "GET / HTTP/1.1\r\nHost: box\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer %s\r\n\r\n", b.key)
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return nc, br
}

// readCloseCode reads server frames until a close frame and returns its
// code.
func readCloseCode(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	for {
		op, payload := readRawFrame(t, br)
		if op == 0x8 {
			if len(payload) < 2 {
				return 1005
			}
			return int(binary.BigEndian.Uint16(payload))
		}
	}
}

// readRawFrame reads one server frame (unmasked, unfragmented) and
// returns its opcode and payload.
func readRawFrame(t *testing.T, br *bufio.Reader) (op byte, payload []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		t.Fatalf("no frame: %v", err)
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		io.ReadFull(br, l[:])
		n = int(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		io.ReadFull(br, l[:])
		n = int(binary.BigEndian.Uint64(l[:]))
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatalf("frame payload: %v", err)
	}
	return h[0] & 0x0f, payload
}

// TestOverLimitFrameRefusedFromHeader sends only the header of a frame
// far over limits.max_message: the kit must refuse it (1009) from the
// header, without waiting for, or making room for, its payload.
func TestOverLimitFrameRefusedFromHeader(t *testing.T) {
	b := serveBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxMessage = "1MB" })
	nc, br := upgradeRaw(t, b)
	if _, err := nc.Write(maskedHeader(200 << 20)); err != nil {
		t.Fatal(err)
	}
	if code := readCloseCode(t, br); code != 1009 {
		t.Errorf("close code after a 200 MiB frame header = %d, want 1009 (too big)", code)
	}
}

// TestFrameBudgetWaits holds the whole frame budget and checks that a
// large frame waits for it, then is served once it is free.
func TestFrameBudgetWaits(t *testing.T) {
	b := newBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxMessage = "1MB" })
	if !b.srv.budget.frames.TryAcquire(b.srv.budget.frameBudget) {
		t.Fatal("the frame budget is not free at the start")
	}
	held := true
	defer func() {
		if held {
			b.srv.budget.frames.Release(b.srv.budget.frameBudget)
		}
	}()
	c := b.dial("/", nil)
	promptWith(c, "p", "echo ok", map[string]any{"pad.txt": inline(strings.Repeat("x", 300<<10))})
	testkit.Until(t, "the frame to wait for budget", func() bool {
		buf := make([]byte, 1<<20)
		st := string(buf[:runtime.Stack(buf, true)])
		return strings.Contains(st, "kit.(*budgets).readFrame") && strings.Contains(st, "semaphore.(*Weighted).Acquire")
	})
	b.srv.budget.frames.Release(b.srv.budget.frameBudget)
	held = false
	if m := last(c.finish("p")); m["type"] != "complete" || m["message"] != "ok\n" {
		t.Errorf("prompt after the budget was freed = %v", m)
	}
	testkit.Until(t, "the frame's budget to be given back", func() bool {
		if b.srv.budget.frames.TryAcquire(b.srv.budget.frameBudget) {
			b.srv.budget.frames.Release(b.srv.budget.frameBudget)
			return true
		}
		return false
	})
}

// TestLargeFrameReadWhole sends a prompt whose frame spans several of
// the pieces a large message is read into, in the client library's small
// fragments, then as one frame, whose header gives its size: its inline
// input must arrive byte for byte either way.
func TestLargeFrameReadWhole(t *testing.T) {
	b := newBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxMessage = "8MB" })
	data := make([]byte, 3*framePiece+frameChunk+17)
	for i := range data {
		data[i] = byte('a' + i%23 + i/framePiece)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:]) + "  in.txt\n"
	text := `cd "$GLOVEBOX_INPUT" && sha256sum in.txt`
	c := b.dial("/", nil)
	promptWith(c, "p", text, map[string]any{"in.txt": inline(string(data))})
	if m := last(c.finish("p")); m["type"] != "complete" || m["message"] != want {
		t.Errorf("prompt with a %d-byte input in fragments = %v, want message %q", len(data), m, want)
	}

	frame, _ := json.Marshal(map[string]any{"type": "prompt", "id": "q", "text": text, "inputs": map[string]any{"in.txt": inline(string(data))}})
	nc, br := upgradeRaw(t, b)
	if _, err := nc.Write(append(maskedHeader(uint64(len(frame))), frame...)); err != nil {
		t.Fatal(err)
	}
	for {
		var m map[string]any
		if _, payload := readRawFrame(t, br); json.Unmarshal(payload, &m) != nil || m["id"] != "q" || m["type"] == "event" {
			continue
		}
		if m["type"] != "complete" || m["message"] != want {
			t.Errorf("prompt with a %d-byte input in one frame = %v, want message %q", len(data), m, want)
		}
		break
	}
}

// TestInlineOutputsFallThrough checks that inline outputs past the
// complete frame's inline budget take the next outputs rule, and that
// without one the prompt fails with a clear error.
func TestInlineOutputsFallThrough(t *testing.T) {
	const cmd = `for i in 1 2 3 4; do head -c 150000 /dev/zero > "$GLOVEBOX_OUTPUT/f$i"; done`
	t.Run("next rule", func(t *testing.T) {
		b := newBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) {
			m.Limits.MaxMessage = "1MB" // an inline budget of 512 KiB
			m.StoragePolicy.Outputs = protocol.Policy{Rules: []protocol.Rule{
				{Use: protocol.Use{Adapter: protocol.AdapterInline}, When: protocol.When{SizeBelow: "1MB"}},
				{Use: protocol.Use{Adapter: protocol.AdapterLocalServer}, When: protocol.When{Default: true}},
			}}
		})
		c := b.dial("/", nil)
		c.prompt("p", cmd)
		kinds := map[string]int{}
		for _, ref := range outputsOf(t, last(c.finish("p"))) {
			kinds[ref["kind"].(string)]++
		}
		if kinds["inline"] != 2 || kinds["server"] != 2 {
			t.Errorf("output kinds = %v, want 2 inline (what fits in 512 KiB) and 2 server", kinds)
		}
	})
	t.Run("no next rule", func(t *testing.T) {
		b := newBox(t, exec.New(), func(m *protocol.Manifest, _ *Options) {
			m.Limits.MaxMessage = "1MB"
			m.StoragePolicy.Outputs = protocol.Policy{Rules: []protocol.Rule{
				{Use: protocol.Use{Adapter: protocol.AdapterInline}, When: protocol.When{Always: true}},
			}}
		})
		c := b.dial("/", nil)
		c.prompt("p", cmd)
		m := last(c.finish("p"))
		e, _ := m["error"].(map[string]any)
		if errCode(m) != protocol.CodeOutput || !strings.Contains(fmt.Sprint(e["message"]), "do not fit inline") {
			t.Errorf("outputs over the inline budget with no other rule = %v, want an output error saying they do not fit", m)
		}
	})
}

// TestReplayCapDroppedSessions drops many resumable sessions, each with a
// frame larger than its share of the replay cap, and checks that the
// buffers together stay under the cap.
func TestReplayCapDroppedSessions(t *testing.T) {
	const sessions, capBytes = 40, 2 << 20
	b := newBox(t, exec.New())
	b.srv.budget.replayCap = capBytes
	for i := range sessions {
		c := b.dial("/", nil)
		c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
		c.prompt("p", "head -c 300000 /dev/zero | tr '\\0' a")
		if m := last(c.finish("p")); m["type"] != "complete" {
			t.Fatalf("session %d: %v", i, m)
		}
		c.drop()
		if got := b.srv.budget.replayBytes.Load(); got > capBytes {
			t.Fatalf("after %d dropped sessions the replay buffers hold %d bytes, over the cap %d", i+1, got, capBytes)
		}
	}
}
