package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// persistManifest is an exec box whose sessions persist.
func persistManifest(t *testing.T, key string) string {
	m, _ := protocol.ParseManifest([]byte(`{"name":"persist"}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.Sessions = &protocol.SessionsSpec{Persist: true, ResumeGrace: "1h"}
	none := 0
	m.Agent = &protocol.AgentSpec{Type: protocol.AgentExec, Warm: &none}
	b, _ := json.Marshal(m)
	p := filepath.Join(t.TempDir(), "glovebox.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// dialPath opens a WebSocket on path and reads its hello.
func (k *realKit) dialPath(t *testing.T, path string) (*wsconn.Conn, map[string]any) {
	t.Helper()
	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+k.port+path, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	h := readFrame(t, c)
	if h["type"] != "hello" {
		t.Fatalf("first frame = %v, want hello", h)
	}
	return c, h
}

// TestPersistentSessionKilledDuringPrompt kills a real kit (SIGKILL, no
// chance to stop) while a persistent session's prompt runs, starts
// another on the same state, and resumes the session by id: its files are
// there, the cut prompt is reported, its processes are gone, and it runs
// the next prompt.
func TestPersistentSessionKilledDuringPrompt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a root kit's session directories, uids and cgroups are what this checks; run as root")
	}
	key := protocol.NewKey()
	root := t.TempDir()
	manifest := persistManifest(t, key)
	k := startRealKit(t, key, manifest, root)
	c, hello := k.dialPath(t, "/")
	sid := hello["session_id"].(string)
	b, _ := json.Marshal(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	if err := c.WriteText(b); err != nil {
		t.Fatal(err)
	}
	sendPrompt(t, c, "p1", "echo acknowledged > note.txt; echo done")
	seq := readUntil(t, c, "complete", "p1")["seq"].(float64)
	marker := "persist-" + sid[:8]
	sendPrompt(t, c, "p2", `: `+marker+`; echo started; while [ ! -e go ]; do sleep 0.05; done`)
	waitEvent(t, c, "p2", "started")
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k.cmd.Wait()

	k2 := startRealKit(t, key, manifest, root)
	k2.waitLogs(t, "persistent sessions kept")
	if pids := testkit.WithCmdline(marker); len(pids) > 0 {
		t.Errorf("the killed kit's session processes %v survived the restart", pids)
	}
	c2, h2 := k2.dialPath(t, "/?resume="+sid+"&last_seq="+strconv.FormatFloat(seq, 'f', -1, 64))
	if h2["resumed"] != true || h2["restarted"] != true || h2["session_id"] != sid {
		t.Fatalf("resume after the kill: hello %v", h2)
	}
	if m := readFrame(t, c2); m["type"] != "error" || m["id"] != "p2" {
		t.Fatalf("first frame after the resume = %v, want the cut prompt's error", m)
	}
	sendPrompt(t, c2, "p3", "cat note.txt; id -u")
	m := readUntil(t, c2, "complete", "p3")
	if msg, _ := m["message"].(string); !strings.Contains(msg, "acknowledged") {
		t.Fatalf("after the kill the session's file is %v", m)
	}
	if s := m["seq"].(float64); s <= seq {
		t.Errorf("seq %v after the restart, not past %v", s, seq)
	}
}
