package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// realKit is a glovebox-kit process the test started.
type realKit struct {
	cmd  *exec.Cmd
	port string
	key  string
	root string
	logs chan string // the kit's stderr, line by line
}

// parkingManifest writes an exec box's manifest that parks every output
// in the box's file store, with the drain time given.
func parkingManifest(t *testing.T, key, drain string) string {
	m, _ := protocol.ParseManifest([]byte(`{"name":"drain"}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.StoragePolicy.Outputs = protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: protocol.AdapterLocalServer}, When: protocol.When{Always: true}}}}
	m.Sessions = &protocol.SessionsSpec{Drain: drain}
	// No warm sessions: the recovery tests count exactly what one dead
	// session leaves, and a warm one is a session of its own.
	none := 0
	m.Agent = &protocol.AgentSpec{Type: protocol.AgentExec, Warm: &none}
	b, _ := json.Marshal(m)
	p := filepath.Join(t.TempDir(), "glovebox.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startRealKit starts glovebox-kit on a free port and waits for its listen
// line.
func startRealKit(t *testing.T, key, manifest, root string) *realKit {
	t.Helper()
	cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0", "GLOVEBOX_INIT=off")
	cmd.Args = append(cmd.Args, "--manifest", manifest, "--root", root)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	k := &realKit{cmd: cmd, key: key, root: root, logs: make(chan string, 1024)}
	ports := make(chan string, 1)
	go func() {
		addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if m := addrRE.FindStringSubmatch(line); m != nil && !sent {
				ports <- m[1]
				sent = true
			}
			select {
			case k.logs <- line:
			default:
			}
		}
		close(k.logs)
	}()
	k.port = testkit.Recv(t, ports, "the kit's listen line")
	return k
}

// dial opens a session and returns it with its hello.
func (k *realKit) dial(t *testing.T) (*wsconn.Conn, protocol.ServerHello) {
	t.Helper()
	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+k.port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	var h protocol.ServerHello
	if m := readFrame(t, c); m["type"] != "hello" {
		t.Fatalf("first frame = %v, want hello", m)
	} else {
		b, _ := json.Marshal(m)
		json.Unmarshal(b, &h)
	}
	return c, h
}

// readFrame reads one frame, bounded by the test's wait limit.
func readFrame(t *testing.T, c *wsconn.Conn) map[string]any {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(testkit.Timeout))
	b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read a frame: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return m
}

// readUntil reads frames until one of type typ (and id, when set) arrives.
func readUntil(t *testing.T, c *wsconn.Conn, typ, id string) map[string]any {
	t.Helper()
	for {
		m := readFrame(t, c)
		if m["type"] == typ && (id == "" || m["id"] == id) {
			return m
		}
		if m["type"] == "error" && m["id"] == id {
			t.Fatalf("prompt %s failed: %v", id, m)
		}
	}
}

// gatedPrompt is a prompt that prints "started" and then waits until the
// file "go" appears in its work directory, then writes an output.
const gatedPrompt = `echo started; while [ ! -e go ]; do sleep 0.05; done; echo parked > "$GLOVEBOX_OUTPUT/result.txt"; echo finished`

func sendPrompt(t *testing.T, c *wsconn.Conn, id, text string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "prompt", "id": id, "text": text, "inputs": map[string]any{}})
	if err := c.WriteText(b); err != nil {
		t.Fatalf("send prompt %s: %v", id, err)
	}
}

// TestDrainOnSIGTERM sends SIGTERM to a real kit while a prompt runs: the
// box refuses new sessions and prompts, reports draining on /health,
// tells the client, lets the prompt finish and park its output, and exits
// 0; the parked file is still served by the next kit on the same state.
func TestDrainOnSIGTERM(t *testing.T) {
	key := protocol.NewKey()
	root := traversableDir(t) // as in the image: the kit user reaches it, so root separates
	manifest := parkingManifest(t, key, "2m")
	k := startRealKit(t, key, manifest, root)
	c, hello := k.dial(t)
	if !strings.Contains(strings.Join(hello.Capabilities, " "), protocol.CapDrain) {
		t.Errorf("hello capabilities %v lack %q", hello.Capabilities, protocol.CapDrain)
	}
	sendPrompt(t, c, "p1", gatedPrompt)
	waitEvent(t, c, "p1", "started")

	before := time.Now()
	if err := k.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	d := readUntil(t, c, "draining", "")
	if dl, _ := d["deadline"].(float64); time.UnixMilli(int64(dl)).Before(before.Add(time.Minute)) {
		t.Errorf("draining deadline %v is not the 2m drain after SIGTERM (%v)", d["deadline"], before)
	}

	// /health says draining with 503.
	resp, err := http.Get("http://127.0.0.1:" + k.port + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var h protocol.Health
	json.Unmarshal(body, &h)
	if resp.StatusCode != http.StatusServiceUnavailable || !h.Draining || h.OK {
		t.Errorf("/health while draining = %d %s, want 503 with draining true and ok false", resp.StatusCode, body)
	}
	// The liveness probe still says the kit is alive: a platform must not
	// restart a box in the middle of its drain.
	resp, err = http.Get("http://127.0.0.1:" + k.port + "/health/live")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	h = protocol.Health{}
	json.Unmarshal(body, &h)
	if resp.StatusCode != http.StatusOK || !h.Draining {
		t.Errorf("/health/live while draining = %d %s, want 200 with draining true", resp.StatusCode, body)
	}
	// A new session is refused with a clear answer.
	_, resp, err = wsconn.Dial(testkit.Context(t, "a refused handshake"), "ws://127.0.0.1:"+k.port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("new session while draining: %v %v, want 503", resp, err)
	}
	refusal, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(refusal), "shutting down") {
		t.Errorf("refusal = %q (Retry-After %q), want a body saying the box is shutting down and a Retry-After", refusal, resp.Header.Get("Retry-After"))
	}
	// A new prompt on the open session is refused too.
	sendPrompt(t, c, "p2", "echo never")
	if e := readUntil(t, c, "error", "p2"); e["error"].(map[string]any)["code"] != protocol.CodeDraining {
		t.Errorf("new prompt while draining: %v, want code %s", e, protocol.CodeDraining)
	}

	// The running prompt finishes and its output is parked.
	if err := os.WriteFile(filepath.Join(root, "work", hello.SessionID, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := readUntil(t, c, "complete", "p1")
	if !strings.Contains(done["message"].(string), "finished") {
		t.Errorf("complete message = %q, want the prompt's whole output", done["message"])
	}
	ref, _ := done["outputs"].(map[string]any)["result.txt"].(map[string]any)
	if ref["kind"] != protocol.KindServer {
		t.Fatalf("outputs = %v, want result.txt parked (kind server)", done["outputs"])
	}
	if err := testkit.Exit(t, k.cmd, "the kit to exit after its drain"); err != nil {
		t.Fatalf("exit after the drain: %v, want status 0", err)
	}

	// The next kit on the same state serves the parked output.
	k2 := startRealKit(t, key, manifest, root)
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+k2.port+"/files/"+ref["id"].(string), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != "parked\n" {
		t.Errorf("parked output after restart = %d %q, want 200 \"parked\\n\"", resp.StatusCode, got)
	}
}

// TestDrainSecondSignal cuts a drain with a second SIGTERM: the kit exits
// at once, long before its drain time, with status 1.
func TestDrainSecondSignal(t *testing.T) {
	key := protocol.NewKey()
	root := traversableDir(t)
	k := startRealKit(t, key, parkingManifest(t, key, "10m"), root)
	c, _ := k.dial(t)
	sendPrompt(t, c, "p1", gatedPrompt)
	waitEvent(t, c, "p1", "started")
	k.cmd.Process.Signal(syscall.SIGTERM)
	readUntil(t, c, "draining", "")
	k.cmd.Process.Signal(syscall.SIGTERM)
	// The drain time is ten minutes; testkit gives up far sooner.
	err := testkit.Exit(t, k.cmd, "the kit to exit after a second SIGTERM")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit after a second signal: %v, want status 1", err)
	}
}

// waitEvent reads frames until an event of prompt id whose data contains
// text.
func waitEvent(t *testing.T, c *wsconn.Conn, id, text string) {
	t.Helper()
	for {
		m := readFrame(t, c)
		if m["type"] == "error" && m["id"] == id {
			t.Fatalf("prompt %s failed: %v", id, m)
		}
		if m["type"] == "event" && m["id"] == id {
			b, _ := json.Marshal(m["data"])
			if strings.Contains(string(b), text) {
				return
			}
		}
	}
}
