package kit

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestEgressSessionRules: a session's own rules, set in its hello, by an
// egress frame and by the admin route, narrow its egress and widen it
// only within session_may_allow, apply to its next connection at once,
// leave other sessions alone, and show in its egress frames, its
// GET /sessions/{id}/egress and a resumed session's hello.
func TestEgressSessionRules(t *testing.T) {
	b, outside, _ := egressBoxWith(t, func(m *protocol.Manifest, o *Options) {
		m.Network.SessionMayAllow = []string{"api.outside.test"}
	})
	port := outside.Listener.Addr().(*net.TCPAddr).Port
	curl := func(c *v1client, id, host string) string {
		t.Helper()
		c.prompt(id, fmt.Sprintf("curl -sS http://%s:%d/", host, port))
		return text(c.finish(id))
	}
	egressFrame := func(c *v1client) map[string]any {
		t.Helper()
		f := c.next()
		if f["type"] != "egress" {
			t.Fatalf("answer = %v, want an egress frame", f)
		}
		return f
	}

	c := b.dial("/", nil)
	if !strings.Contains(fmt.Sprint(c.hello["capabilities"]), protocol.CapEgressRules) {
		t.Errorf("hello capabilities %v lack %q", c.hello["capabilities"], protocol.CapEgressRules)
	}
	if eg, _ := c.hello["egress"].(map[string]any); eg == nil || fmt.Sprint(eg["session_may_allow"]) != "[api.outside.test]" {
		t.Errorf("hello egress = %v, want the box's policy", c.hello["egress"])
	}
	c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}, "egress": map[string]any{"default": "deny"}})
	f := egressFrame(c)
	if pol, _ := f["policy"].(map[string]any); pol == nil || fmt.Sprint(pol["session"]) != "map[default:deny]" {
		t.Errorf("egress answer = %v, want the session's rules", f)
	}
	if all := curl(c, "p1", "outside.test"); !strings.Contains(all, "this session's own egress rules") || !strings.Contains(all, `session: default = \"deny\"`) {
		t.Errorf("narrowed at open: outside.test is not blocked by the session's rules:\n%s", all)
	}
	other := b.dial("/", nil)
	if all := curl(other, "q1", "outside.test"); !strings.Contains(all, "hello from outside") {
		t.Errorf("another session is narrowed too:\n%s", all)
	}

	// Widen within session_may_allow; beyond it stays closed.
	c.send(map[string]any{"type": "egress", "rules": map[string]any{"allow": []string{"api.outside.test", "blocked.test"}}})
	egressFrame(c)
	if all := curl(c, "p2", "api.outside.test"); !strings.Contains(all, "hello from outside") {
		t.Errorf("widened within session_may_allow: api.outside.test blocked:\n%s", all)
	}
	if all := curl(c, "p3", "blocked.test"); !strings.Contains(all, "was blocked") {
		t.Errorf("widened beyond session_may_allow: blocked.test reached:\n%s", all)
	}
	if all := curl(other, "q2", "api.outside.test"); !strings.Contains(all, "was blocked") {
		t.Errorf("another session got the widening:\n%s", all)
	}
	// Bad rules are refused; the session keeps the rules it had.
	c.send(map[string]any{"type": "egress", "rules": map[string]any{"allow": []string{"*.*"}, "session_may_allow": []string{"x.test"}}})
	if f := egressFrame(c); !strings.Contains(fmt.Sprint(f["error"]), "session_may_allow") {
		t.Errorf("bad rules answer = %v", f)
	}

	// The admin route.
	id, _ := c.hello["session_id"].(string)
	post := func(bearer, path, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			sb.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, sb.String()
	}
	if code, _ := post(b.token(protocol.ScopeConnect), "/sessions/"+id+"/egress", `{"default":"deny"}`); code != http.StatusUnauthorized {
		t.Errorf("POST /sessions/{id}/egress with a connect token = %d, want 401", code)
	}
	if code, out := post(b.key, "/sessions/nosuch/egress", `{"default":"deny"}`); code != http.StatusNotFound {
		t.Errorf("POST for an unknown session = %d %s", code, out)
	}
	if code, out := post(b.key, "/sessions/"+id+"/egress", `{"default":"deny","allow":["outside.test"]}`); code != 200 || !strings.Contains(out, `"session":{"default":"deny","allow":["outside.test"]}`) {
		t.Fatalf("POST /sessions/{id}/egress = %d %s", code, out)
	}
	if all := curl(c, "p4", "api.outside.test"); !strings.Contains(all, "was blocked") {
		t.Errorf("after the admin route narrowed it, api.outside.test still reached:\n%s", all)
	}
	// /environment?session=ID: the session's effective policy, for the
	// key, and for no other session's credential.
	resp, body := b.get("/environment?session="+id, b.auth())
	var env protocol.Environment
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != 200 || env.Network == nil || env.Network.Session == nil || env.Network.Session.Default != "deny" {
		t.Errorf("GET /environment?session=ID = %d %s", resp.StatusCode, body)
	}
	if resp, body := b.get("/environment?session="+id, bearer(b.token(protocol.ScopeConnect, protocol.ScopeEnvironment))); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /environment?session=ID with another credential = %d %s, want 404", resp.StatusCode, body)
	}
	tok := b.token(protocol.ScopeConnect, protocol.ScopeEnvironment)
	own := b.dial("/", bearer(tok))
	ownID, _ := own.hello["session_id"].(string)
	if resp, body := b.get("/environment?session="+ownID, bearer(tok)); resp.StatusCode != 200 || !strings.Contains(string(body), `"network"`) {
		t.Errorf("GET /environment?session=ID with the session's own token = %d %s", resp.StatusCode, body)
	}
	resp, body = b.get("/sessions/"+id+"/egress", b.auth())
	var v protocol.EgressEnvironment
	if err := json.Unmarshal(body, &v); err != nil || resp.StatusCode != 200 || v.Session == nil || v.Session.Default != "deny" {
		t.Errorf("GET /sessions/{id}/egress = %d %s", resp.StatusCode, body)
	}
}
