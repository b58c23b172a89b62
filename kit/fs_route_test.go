package kit

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestFSRoute: /sessions/{id}/fs answers the session's credential, a
// workspace or admin token and the key; another owner's credential gets
// 404 as if the session did not exist; the hello announces "fs"; what the
// agent wrote is read, and what the client wrote is the agent's.
func TestFSRoute(t *testing.T) {
	b := newBox(t, scripted(nil))
	mint := b.tokenFor
	alice := mint("alice", protocol.ScopeConnect)
	c := b.dial("/", bearer(alice))
	id := c.hello["session_id"].(string)
	caps, _ := c.hello["capabilities"].([]any)
	if !slices.Contains(caps, any(protocol.CapWorkspaceFiles)) {
		t.Errorf("the hello's capabilities %v lack %q", caps, protocol.CapWorkspaceFiles)
	}
	do := func(method, p string, tok string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, b.url+"/sessions/"+id+"/fs"+p, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	c.prompt("p1", "write made/by-agent.txt 5")
	c.finish("p1")
	for _, tc := range []struct {
		name, method, path, tok, body string
		want                          int
	}{
		{"the session's credential reads", "GET", "/output/made/by-agent.txt", alice, "", 200},
		{"the same subject writes", "PUT", "/work/from-client.txt", mint("alice", protocol.ScopeConnect), "hi", 201},
		{"a workspace token", "GET", "/work/from-client.txt?stat=1", mint("", protocol.ScopeWorkspace), "", 200},
		{"an admin token", "GET", "/work", mint("", protocol.ScopeAdmin), "", 200},
		{"the key", "GET", "", b.key, "", 200},
		{"another owner", "GET", "/work/from-client.txt", mint("bob", protocol.ScopeConnect), "", 404},
		{"another scope", "GET", "/work/from-client.txt", mint("", protocol.ScopeExec), "", 401},
	} {
		if code, body := do(tc.method, tc.path, tc.tok, tc.body); code != tc.want {
			t.Errorf("%s: %s %s = %d %s, want %d", tc.name, tc.method, tc.path, code, body, tc.want)
		}
	}
	if _, body := do("GET", "/output/made/by-agent.txt", alice, ""); body != "xxxxx" {
		t.Errorf("the agent's file reads %q, want xxxxx", body)
	}
	// A watch under way ends with the session (checkLeaks at cleanup).
	req, _ := http.NewRequest("GET", b.url+"/sessions/"+id+"/fs/output?watch=1", nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	watch, err := http.DefaultClient.Do(req)
	if err != nil || watch.StatusCode != 200 {
		t.Fatalf("watch: %v %v", watch.Status, err)
	}
	c.prompt("p2", "write made/second.txt 1")
	c.finish("p2")
	line, err := bufio.NewReader(watch.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, `"create"`) || !strings.Contains(line, "output/made/second.txt") {
		t.Errorf("the watch's first event = %q, %v", line, err)
	}
	defer watch.Body.Close()
	c.close()
	ss := b.srv.live.lookup(id)
	if ss != nil {
		ss.end(errClosed)
	}
	if code, body := do("GET", "/work", b.key, ""); code != http.StatusNotFound && code != http.StatusGone {
		t.Errorf("GET of an ended session's files = %d %s, want 404 or 410", code, body)
	}
}
