package acp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/acp"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A persistent session's ACP conversation outlives the kit: after a
// restart its client resumes it by id and the agent (which can load
// sessions) continues the conversation it had.
func TestPersistentSessionContinuesItsConversation(t *testing.T) {
	key := protocol.NewKey()
	root := t.TempDir()
	m, err := protocol.ParseManifest([]byte(`{"name":"acp-persist","version":"0.1.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(key)
	none := 0
	m.Agent = &protocol.AgentSpec{Type: protocol.AgentACP, Command: testAgent(t), Warm: &none}
	m.Sessions = &protocol.SessionsSpec{Persist: true, ResumeGrace: "1h"}
	serve := func() (*kit.Server, *httptest.Server) {
		log := testkit.Logger(t, 0)
		ag, err := acp.New(m.Agent, log)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := kit.New(kit.Options{Manifest: m, Key: key, Root: root, Agent: ag, Logger: log, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		return srv, httptest.NewServer(srv.Handler())
	}
	stop := func(srv *kit.Server, ts *httptest.Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("kit Close: %v", err)
		}
		ts.Close()
	}

	srv, ts := serve()
	c := dial(t, ts.URL, key)
	hello := c.next()
	sid := hello["session_id"].(string)
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
	c.prompt("p1", "echo remember me", nil)
	seq := last(c.finish("p1"))["seq"].(float64)
	stop(srv, ts) // with the client connected: a client that closes ends its session
	c.close()

	srv, ts = serve()
	defer stop(srv, ts)
	c2 := dialPath(t, ts.URL, key, "/?resume="+sid+"&last_seq="+strconv.FormatFloat(seq, 'f', -1, 64))
	defer c2.close()
	if h := c2.next(); h["resumed"] != true || h["session_id"] != sid {
		t.Fatalf("resume after the restart: %v", h)
	}
	c2.prompt("p2", "history", nil)
	fs := c2.finish("p2")
	end := last(fs)
	var history []string
	if end["type"] != "complete" || json.Unmarshal([]byte(end["message"].(string)), &history) != nil {
		t.Fatalf("p2 ended with %v", end)
	}
	if strings.Join(history, "|") != "echo remember me|history" {
		t.Errorf("the agent's conversation after the restart: %q, want it continued", history)
	}
	for _, d := range events(fs, "text_delta") {
		if strings.Contains(d["text"].(string), "replayed") {
			t.Errorf("the loaded conversation's replay reached the client: %v", d)
		}
	}
}

// A session restored or forked from a snapshot continues the snapshotted
// session's conversation: the snapshot names the agent's session, whose
// files (the agent keeps them under its HOME, the work directory) it
// holds, and the new session's agent loads it.
func TestSnapshotCarriesTheConversation(t *testing.T) {
	command := testAgent(t)
	k := serveACP(t, &protocol.AgentSpec{Type: protocol.AgentACP, Command: command}, 0)
	c := dial(t, k.url, k.key)
	defer c.close()
	sid := c.next()["session_id"].(string)
	c.prompt("p1", "echo keep this", nil)
	if end := last(c.finish("p1")); end["type"] != "complete" {
		t.Fatalf("p1: %v", end)
	}
	post := func(path, body string, out any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, k.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, out) != nil {
			t.Fatalf("POST %s = %d %s", path, resp.StatusCode, b)
		}
	}
	var info protocol.SnapshotInfo
	post("/sessions/"+sid+"/snapshot", "", &info)
	var res protocol.RestoreResult
	post("/snapshots/"+info.ID+"/restore", "", &res)
	var fork protocol.ForkResult
	post("/sessions/"+sid+"/fork", `{"count":1}`, &fork)
	for _, id := range []string{res.Session, fork.Sessions[0]} {
		c2 := dialPath(t, k.url, k.key, "/?resume="+id+"&last_seq=0")
		if h := c2.next(); h["session_id"] != id {
			t.Fatalf("attach to %s: %v", id, h)
		}
		c2.prompt("p2", "history", nil)
		end := last(c2.finish("p2"))
		var history []string
		if end["type"] != "complete" || json.Unmarshal([]byte(end["message"].(string)), &history) != nil {
			t.Fatalf("%s: p2 ended with %v", id, end)
		}
		if strings.Join(history, "|") != "echo keep this|history" {
			t.Errorf("%s: the conversation is %q, want the snapshotted one continued", id, history)
		}
		c2.close()
	}
}
