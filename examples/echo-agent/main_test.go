package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The test binary doubles as the example when this variable is set.
func TestMain(m *testing.M) {
	sandbox.MaybeSupervise() // the test binary serves as its sessions' supervisor
	if os.Getenv("ECHO_AGENT_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	testkit.Main(m)
}

// TestEchoAgent runs the example as a process and talks to it as a client
// would: streamed words, a display slot answered, an output file returned.
func TestEchoAgent(t *testing.T) {
	key := protocol.NewKey()
	m, _ := protocol.ParseManifest([]byte(`{"name":"echo","agent":{"type":"go"}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	mb, _ := json.Marshal(m)
	manifest := filepath.Join(t.TempDir(), "glovebox.json")
	os.WriteFile(manifest, mb, 0o644)

	cmd := exec.Command(os.Args[0], "--manifest", manifest, "--root", t.TempDir())
	cmd.Env = []string{"ECHO_AGENT_AS_MAIN=1", "GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0"}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	port := ""
	for port == "" && sc.Scan() {
		if m := regexp.MustCompile(`addr=\S*:(\d+)`).FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	if port == "" {
		t.Fatal("the example logged no address")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	read := func() map[string]any {
		b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	if h := read(); h["type"] != "hello" {
		t.Fatalf("first frame %v", h)
	}
	c.WriteText([]byte(`{"type":"prompt","id":"req_1","text":"hello glovebox world"}`))
	var words []string
	for {
		m := read()
		if m["type"] == "event" {
			words = append(words, m["data"].(map[string]any)["text"].(string))
			continue
		}
		if m["type"] != "display_push" {
			t.Fatalf("frame %v, want the confirm slot", m)
		}
		slot := m["slot"].(map[string]any)
		c.WriteText([]byte(`{"type":"display_resolve","slot_id":"` + slot["id"].(string) + `","value":true}`))
		break
	}
	if len(words) != 3 {
		t.Errorf("streamed %q, want 3 words", words)
	}
	var done map[string]any
	for done == nil {
		if m := read(); m["type"] == "complete" || m["type"] == "error" {
			done = m
		}
	}
	if done["message"] != "echoed 3 words" {
		t.Fatalf("final frame %v", done)
	}
	ref, _ := done["outputs"].(map[string]any)["echo.txt"].(map[string]any)
	if data, _ := base64.StdEncoding.DecodeString(ref["data"].(string)); string(data) != "hello glovebox world\n" {
		t.Errorf("echo.txt = %q", data)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := testkit.Exit(t, cmd, "the echo agent after SIGTERM"); err != nil {
		t.Errorf("exit: %v", err)
	}
}
