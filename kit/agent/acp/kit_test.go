package acp_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent/acp/internal/testagents"
	"github.com/glovebox-dev/glovebox/protocol"
)

// testAgent is the SDK test agent's command, or a skip (a failure when
// CI is set) when node is missing or its npm packages cannot be installed.
func testAgent(t testing.TB) []string {
	t.Helper()
	node := testagents.Node(t)
	return []string{node, filepath.Join(testagents.Dir(t, "agent"), "agent.mjs")}
}

// wsClient is a v1 client: JSON frames over a real WebSocket.
type wsClient struct {
	t      testing.TB
	c      *wsconn.Conn
	frames chan map[string]any
	done   chan struct{}
}

func dial(t testing.TB, srvURL, key string) *wsClient {
	t.Helper()
	return dialPath(t, srvURL, key, "/")
}

// dialPath is dial to path (a resume's query, say).
func dialPath(t testing.TB, srvURL, key, path string) *wsClient {
	t.Helper()
	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(srvURL, "http")+path, wsconn.DialOptions{
		Header: http.Header{"Authorization": {"Bearer " + key}},
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	w := &wsClient{t: t, c: c, frames: make(chan map[string]any, 1024), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.frames)
		for {
			data, err := c.ReadMessage()
			if err != nil {
				return
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Errorf("frame is not a JSON object: %q", data)
				return
			}
			w.frames <- m
		}
	}()
	return w
}

func (w *wsClient) close() {
	_ = w.c.WriteClose(wsconn.CloseNormal, "bye", time.Now().Add(time.Second))
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
	}
	_ = w.c.Close()
	<-w.done
}

func (w *wsClient) send(v map[string]any) {
	w.t.Helper()
	b, _ := json.Marshal(v)
	if err := w.c.WriteText(b); err != nil {
		w.t.Fatalf("send: %v", err)
	}
}

func (w *wsClient) next() map[string]any {
	w.t.Helper()
	m, ok := testkit.Next(w.t, w.frames, "the kit's next frame")
	if !ok {
		w.t.Fatal("connection closed while waiting for the kit's next frame")
	}
	return m
}

// until reads frames up to and including the first that stop accepts.
func (w *wsClient) until(stop func(map[string]any) bool) []map[string]any {
	w.t.Helper()
	var got []map[string]any
	for {
		m := w.next()
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

func (w *wsClient) finish(id string) []map[string]any {
	w.t.Helper()
	return w.until(func(m map[string]any) bool {
		return (m["type"] == "complete" || m["type"] == "error") && m["id"] == id
	})
}

func (w *wsClient) prompt(id, text string, inputs map[string]any) {
	w.t.Helper()
	if inputs == nil {
		inputs = map[string]any{}
	}
	w.send(map[string]any{"type": "prompt", "id": id, "text": text, "inputs": inputs})
}

func events(frames []map[string]any, eventType string) []map[string]any {
	var out []map[string]any
	for _, f := range frames {
		if f["type"] == "event" && f["event_type"] == eventType {
			d, _ := f["data"].(map[string]any)
			out = append(out, d)
		}
	}
	return out
}

// TestThroughKit boxes the SDK test agent in a real kit and talks to it
// as a v1 client over a real WebSocket.
func TestThroughKit(t *testing.T) {
	command := testAgent(t)
	k := serveACP(t, &protocol.AgentSpec{Type: protocol.AgentACP, Command: command}, slog.LevelDebug)

	c := dial(t, k.url, k.key)
	defer c.close()
	if hello := c.next(); hello["type"] != "hello" {
		t.Fatalf("first frame = %v, want hello", hello)
	}

	// Streaming text: v1 text_delta events, then complete with the text.
	c.prompt("p1", "echo hello from the box", nil)
	fs := c.finish("p1")
	end := fs[len(fs)-1]
	if end["type"] != "complete" || end["message"] != "hello from the box" {
		t.Fatalf("p1 ended with %v", end)
	}
	var text string
	for _, d := range events(fs, "text_delta") {
		text += d["text"].(string)
	}
	if text != "hello from the box" {
		t.Errorf("text_delta events spell %q", text)
	}
	if got := events(fs, "stop"); len(got) != 1 || got[0]["reason"] != "end_turn" {
		t.Errorf("stop events = %v", got)
	}

	// Permission: a display slot with v1's renderer, resolved by optionId.
	c.prompt("p2", "permission", nil)
	push := c.until(func(m map[string]any) bool { return m["type"] == "display_push" })
	slot := push[len(push)-1]["slot"].(map[string]any)
	input := slot["input"].(map[string]any)
	if slot["renderer"] != "permission_request" || input["toolName"] != "rm -rf /work/tmp" || len(input["options"].([]any)) != 3 {
		t.Fatalf("display_push slot = %v", slot)
	}
	c.send(map[string]any{"type": "display_resolve", "slot_id": slot["id"], "value": "always"})
	if end := last(c.finish("p2")); end["message"] != "selected always" {
		t.Errorf("p2 ended with %v", end)
	}

	// Abort: session/cancel, the agent answers cancelled, the kit reports
	// AbortError and the agent process goes on.
	c.prompt("p3", "wait", nil)
	c.until(func(m map[string]any) bool { return m["type"] == "event" && m["id"] == "p3" })
	c.send(map[string]any{"type": "abort", "id": "p3"})
	if end := last(c.finish("p3")); end["type"] != "error" || end["error"].(map[string]any)["code"] != "AbortError" {
		t.Errorf("p3 ended with %v", end)
	}
	c.prompt("p4", "count", nil)
	if end := last(c.finish("p4")); end["message"] != "4" {
		t.Errorf("p4: count = %v, want 4 prompts on one process", end["message"])
	}

	// Inputs arrive as resource links the agent can read through fs/*,
	// and what it writes to the output directory comes back as outputs.
	c.prompt("p5", "inputs", map[string]any{"in.txt": map[string]any{
		"kind": "inline", "name": "in.txt", "mime": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte("from input\n")),
	}})
	end = last(c.finish("p5"))
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(end["message"].(string)), &blocks); err != nil || len(blocks) < 2 {
		t.Fatalf("p5 ended with %v", end)
	}
	link := blocks[len(blocks)-1]
	u, err := url.Parse(fmt.Sprint(link["uri"]))
	if link["type"] != "resource_link" || link["name"] != "in.txt" || link["mimeType"] != "text/plain" || link["size"] != float64(11) || err != nil || u.Scheme != "file" {
		t.Fatalf("input block = %v", link)
	}
	c.prompt("p6", "read "+u.Path, nil)
	if end := last(c.finish("p6")); end["message"] != "from input\n" {
		t.Errorf("p6: reading the input gave %v", end)
	}
	c.prompt("p7", "env", nil)
	end = last(c.finish("p7"))
	var env struct {
		Output string
		Pid    int
	}
	if err := json.Unmarshal([]byte(end["message"].(string)), &env); err != nil || env.Output == "" {
		t.Fatalf("p7 ended with %v", end)
	}
	c.prompt("p8", "write "+env.Output+"/result.txt done", nil)
	end = last(c.finish("p8"))
	outs, _ := end["outputs"].(map[string]any)
	res, _ := outs["result.txt"].(map[string]any)
	if data, _ := base64.StdEncoding.DecodeString(fmt.Sprint(res["data"])); end["message"] != "written" || string(data) != "done" {
		t.Errorf("p8 ended with %v", end)
	}
	// The file the kit wrote for the agent is the agent's to change, and
	// so is the kit's to rewrite one the agent's own programs made.
	c.prompt("p9", "shell echo more >> "+env.Output+"/result.txt && echo mine > "+env.Output+"/own.txt && cat "+env.Output+"/result.txt", nil)
	if end := last(c.finish("p9")); end["message"] != "donemore\n" {
		t.Errorf("p9: appending to the file fs/write_text_file made gave %v", end)
	}
	c.prompt("p10", "write "+env.Output+"/own.txt rewritten", nil)
	if end := last(c.finish("p10")); end["message"] != "written" {
		t.Errorf("p10: rewriting a file the agent made gave %v", end)
	}

	// Shutting the kit down stops the agent process. Its own pid is its
	// pid namespace's: it is found by the session's environment instead.
	c.close()
	k.close()
	if pids := testkit.WithEnv("GLOVEBOX_OUTPUT=" + env.Output); len(pids) > 0 {
		t.Errorf("agent processes %v survived the kit's Close", pids)
	}
	checkNoKitGoroutines(t)
}

// checkNoKitGoroutines fails when goroutines of the kit's packages outlive
// its Close. They may take a moment to return after Close does.
func checkNoKitGoroutines(t *testing.T) {
	t.Helper()
	testkit.NoGoroutines(t, "glovebox/kit")
}

func last(fs []map[string]any) map[string]any { return fs[len(fs)-1] }
