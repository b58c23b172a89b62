package kit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

const egressSecret = "sk-the-real-key-0123456789"

// egressBox is a box with a deny-default policy allowing outside.test
// and brokering API_KEY, whose names resolve (through the proxy's seam)
// to a TEST-NET address that the dialer seam maps to a loopback server.
func egressBox(t *testing.T) (*box, *httptest.Server, *atomic.Value) {
	t.Helper()
	return egressBoxWith(t)
}

// egressBoxWith is egressBox with more options.
func egressBoxWith(t *testing.T, opts ...boxOpt) (*box, *httptest.Server, *atomic.Value) {
	t.Helper()
	var seen atomic.Value // the last x-api-key the outside server got
	seen.Store("")
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, "hello from outside\n")
	}))
	t.Cleanup(outside.Close)
	port := outside.Listener.Addr().(*net.TCPAddr).Port
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), append([]boxOpt{func(m *protocol.Manifest, o *Options) {
		m.Network = &protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}}
		m.Env["API_KEY"] = protocol.EnvSpec{Required: true, Secret: true, Inject: &protocol.InjectSpec{Hosts: []string{"api.outside.test"}, Header: "x-api-key"}}
		o.Getenv = func(k string) string {
			if k == "API_KEY" {
				return egressSecret
			}
			return ""
		}
		o.Environ = append(o.Environ, "PATH=/usr/local/bin:/usr/bin:/bin", "API_KEY="+egressSecret)
		o.Egress = EgressOptions{
			// The test's names resolve to a documentation address, which
			// the table closes: the test opens it.
			Guard: netguard.New(netguard.Options{Open: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}}),
			Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				_, p, _ := net.SplitHostPort(addr)
				if p != fmt.Sprint(port) {
					return nil, fmt.Errorf("test dialer: only the outside server's port %d", port)
				}
				var d net.Dialer
				return d.DialContext(ctx, network, outside.Listener.Addr().String())
			},
		}
	}}, opts...)...)
	return b, outside, &seen
}

// text gathers everything a prompt's frames say, for searching.
func text(fs []map[string]any) string {
	b, _ := json.Marshal(fs)
	return string(b)
}

func TestEgressSession(t *testing.T) {
	b, outside, seen := egressBox(t)
	port := outside.Listener.Addr().(*net.TCPAddr).Port
	c := b.dial("/", nil)
	if !strings.Contains(fmt.Sprint(c.hello["capabilities"]), protocol.CapEgress) {
		t.Errorf("hello capabilities %v lack %q", c.hello["capabilities"], protocol.CapEgress)
	}
	c.prompt("p1", fmt.Sprintf(`env; cat /proc/self/environ | tr '\0' '\n';
curl -sS -H "x-api-key: $API_KEY" http://outside.test:%d/ ; curl -sS http://blocked.test:%d/`, port, port))
	fs := c.finish("p1")
	if last(fs)["type"] != "complete" {
		t.Fatalf("prompt = %v", last(fs))
	}
	all := text(fs)
	if strings.Contains(all, egressSecret) {
		t.Errorf("the real key reached the agent:\n%s", all)
	}
	for _, want := range []string{"glovebox-placeholder-API_KEY-", "HTTP_PROXY=http://127.0.0.1:", "ALL_PROXY=socks5h://127.0.0.1:", "SSL_CERT_FILE=", "hello from outside",
		"the connection to blocked.test:" + fmt.Sprint(port) + " was blocked", `[network]`} {
		if !strings.Contains(all, want) {
			t.Errorf("prompt output lacks %q:\n%s", want, all)
		}
	}
	if v := seen.Load().(string); v != "" {
		t.Errorf("outside.test got x-api-key %q: a placeholder sent to another host must arrive stripped", v)
	}
	var decisions []string
	for _, f := range ofType(fs, "event") {
		if f["event_type"] != "egress" {
			continue
		}
		d, _ := f["data"].(map[string]any)
		decisions = append(decisions, fmt.Sprintf("%v %v %v", d["host"], d["decision"], d["rule"]))
	}
	want := []string{"outside.test allow outside.test", `blocked.test deny default = "deny"`}
	if strings.Join(decisions, "|") != strings.Join(want, "|") {
		t.Errorf("egress events = %q, want %q", decisions, want)
	}
	if st := b.srv.EgressStats(); st.Allowed != 1 || st.Denied != 1 {
		t.Errorf("EgressStats = %+v", st)
	}
}

func TestEgressAdmin(t *testing.T) {
	b, outside, _ := egressBox(t)
	port := outside.Listener.Addr().(*net.TCPAddr).Port

	resp, body := b.get("/environment", b.auth())
	var env protocol.Environment
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/environment = %d %s", resp.StatusCode, body)
	}
	// Where sessions get network namespaces, or Landlock and seccomp
	// confine them, the proxy is their only way out; elsewhere agents are
	// only told to use it.
	mode := EgressAdvisory
	if b.srv.sb.Report().ConfinesEgress() {
		mode = EgressEnforced
	}
	if n := env.Network; n == nil || n.Mode != mode || n.Default != "deny" || len(n.Allow) != 1 || len(n.Brokered) != 1 {
		t.Errorf("/environment network = %+v, want %s, deny, one allow, one brokered", n, mode)
	}

	post := func(bearer, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/egress", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	exp := time.Now().Add(time.Hour)
	connectTok, _ := protocol.MintToken(b.key, protocol.TokenClaims{Scopes: []string{protocol.ScopeConnect}, Expires: exp})
	adminTok, _ := protocol.MintToken(b.key, protocol.TokenClaims{Scopes: []string{protocol.ScopeAdmin}, Expires: exp})
	if code, _ := post(connectTok, `{"default":"allow"}`); code != http.StatusUnauthorized {
		t.Errorf("POST /egress with a connect token = %d, want 401", code)
	}
	if code, out := post(adminTok, `{"default":"deny","allow":["*.*"]}`); code != http.StatusBadRequest || !strings.Contains(out, "allow[0]") {
		t.Errorf("POST /egress with a bad rule = %d %s, want 400 naming it", code, out)
	}
	if code, out := post(adminTok, `{"default":"deny","alow":[]}`); code != http.StatusBadRequest {
		t.Errorf("POST /egress with an unknown field = %d %s, want 400", code, out)
	}

	c := b.dial("/", nil)
	c.prompt("p1", fmt.Sprintf("curl -sS http://blocked.test:%d/", port))
	if all := text(c.finish("p1")); !strings.Contains(all, "was blocked") {
		t.Fatalf("before the change: %s", all)
	}
	if code, out := post(adminTok, `{"default":"deny","allow":["outside.test","blocked.test"]}`); code != 200 || !strings.Contains(out, `"blocked.test"`) {
		t.Fatalf("POST /egress = %d %s", code, out)
	}
	c.prompt("p2", fmt.Sprintf("curl -sS http://blocked.test:%d/", port))
	if all := text(c.finish("p2")); !strings.Contains(all, "hello from outside") {
		t.Errorf("after the change the same session's new connection is still blocked: %s", all)
	}
	_, body = b.get("/environment", b.auth())
	if !strings.Contains(string(body), `"blocked.test"`) {
		t.Errorf("/environment does not show the new policy: %s", body)
	}
}

func TestEgressBootErrors(t *testing.T) {
	key := protocol.NewKey()
	m := testManifest(key)
	m.Network = &protocol.NetworkSpec{Default: "sometimes", Allow: []string{"a b"}}
	_, err := New(Options{Manifest: m, Key: key, Root: t.TempDir(), Agent: exec.New(), Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), `manifest: network.default "sometimes"`) || !strings.Contains(err.Error(), "manifest: network.allow[0]") {
		t.Errorf("New with a bad policy = %v, want boot errors naming each problem", err)
	}
}

// preambleAgent records the preamble its session was opened with.
type preambleAgent struct{ got chan string }

func (a preambleAgent) Open(_ context.Context, s *agent.Session) (agent.Conversation, error) {
	a.got <- s.Preamble
	return agent.Func(func(context.Context, agent.Turn) (string, error) { return "", nil }).Open(context.Background(), s)
}

// Where the sandbox gives sessions network namespaces, every box runs the
// proxy, and the agent is told how its network behaves even without a
// [network] table; with that layer off and no policy, nothing is said.
func TestEgressPreambleFollowsTheProxy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network *bool
	}{{"network layer as the platform allows", nil}, {"network layer off", new(bool)}} {
		t.Run(tc.name, func(t *testing.T) {
			a := preambleAgent{got: make(chan string, 1)}
			b := newBox(t, a, func(m *protocol.Manifest, _ *Options) { m.Sandbox = &protocol.SandboxSpec{Network: tc.network} })
			c := b.dial("/", nil)
			c.prompt("p", "hi")
			c.finish("p")
			var pre string
			select {
			case pre = <-a.got:
			case <-time.After(20 * time.Second):
				t.Fatal("the agent was not opened within 20s")
			}
			proxied := b.srv.egress != nil
			if want := tc.network == nil && b.srv.sb.Report().Has(sandbox.LayerNetwork); proxied != want {
				t.Errorf("proxy running = %v, want %v", proxied, want)
			}
			if says := strings.Contains(pre, "egress proxy"); says != proxied {
				t.Errorf("preamble mentions the proxy: %v, proxy running: %v\n%s", says, proxied, pre)
			}
		})
	}
}
