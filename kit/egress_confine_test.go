//go:build linux

package kit

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// confineBox is egressBox without a network namespace per session, let
// to serve whether or not its sandbox confines egress.
func confineBox(t *testing.T) (*box, *httptest.Server) {
	t.Helper()
	b, outside, _ := egressBoxWith(t, func(m *protocol.Manifest, _ *Options) {
		m.Sandbox = &protocol.SandboxSpec{Network: new(false), AllowDegraded: true}
	})
	return b, outside
}

// TestEgressConfineAsked: where sessions have no network namespace, the
// kit asks the session's sandbox to confine its processes to the
// session's egress proxy port (ConfineNet, EgressPort: the port its
// HTTP_PROXY names) before anything starts; with a network namespace it
// does not (the namespace confines them).
func TestEgressConfineAsked(t *testing.T) {
	for _, netns := range []bool{false, true} {
		t.Run(fmt.Sprintf("netns=%v", netns), func(t *testing.T) {
			var b *box
			if netns {
				b, _, _ = egressBox(t)
				if !b.srv.sb.Report().Has(sandbox.LayerNetwork) {
					t.Skip("no network namespaces here")
				}
			} else {
				b, _ = confineBox(t)
			}
			c := b.dial("/", nil)
			c.prompt("p", `echo "$HTTP_PROXY"`)
			m := last(c.finish("p"))
			if m["type"] != "complete" {
				t.Fatalf("prompt = %v", m)
			}
			u, err := url.Parse(strings.TrimSpace(m["message"].(string)))
			if err != nil {
				t.Fatalf("HTTP_PROXY = %q: %v", m["message"], err)
			}
			b.srv.mu.Lock()
			ss := b.srv.sessions[c.hello["session_id"].(string)]
			b.srv.mu.Unlock()
			box := ss.workspace.info.Sandbox
			if netns {
				if box.ConfineNet || box.EgressPort != 0 {
					t.Errorf("with a network namespace: ConfineNet %v, EgressPort %d, want neither", box.ConfineNet, box.EgressPort)
				}
				return
			}
			if !box.ConfineNet || fmt.Sprint(box.EgressPort) != u.Port() {
				t.Errorf("ConfineNet %v, EgressPort %d; want true and the proxy's port %s", box.ConfineNet, box.EgressPort, u.Port())
			}
		})
	}
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// TestEgressConfinedWithoutNetns: on a kernel with Landlock ABI 4 or later
// and seccomp, a box without network namespaces still makes its egress
// proxy a session's only way out: a direct connection (here to a loopback
// server, ignoring HTTP_PROXY) is refused, the proxy works, and
// /environment says enforced. It needs the sandbox's Landlock and seccomp
// layers.
func TestEgressConfinedWithoutNetns(t *testing.T) {
	if abi := landlockABI(); abi < 4 {
		t.Skipf("the kernel's Landlock ABI is %d: connections can be confined from ABI 4", abi)
	}
	b, outside := confineBox(t)
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "reached directly") }))
	t.Cleanup(direct.Close)
	port := outside.Listener.Addr().(*net.TCPAddr).Port

	_, body := b.get("/environment", b.auth())
	var env protocol.Environment
	json.Unmarshal(body, &env)
	if env.Network == nil || env.Network.Mode != EgressEnforced {
		t.Errorf("/environment network = %+v, want mode %s (report: %s)", env.Network, EgressEnforced, b.srv.sb.Report())
	}
	c := b.dial("/", nil)
	c.prompt("p", fmt.Sprintf(`curl -sS --max-time 5 --noproxy '*' %s/ ; echo "direct: $?"; curl -sS http://outside.test:%d/`, direct.URL, port))
	fs := c.finish("p")
	all := text(fs)
	if strings.Contains(all, "reached directly") || strings.Contains(all, "direct: 0") {
		t.Errorf("a session reached a server directly, around its egress proxy:\n%s", all)
	}
	if !strings.Contains(all, "hello from outside") {
		t.Errorf("the egress proxy did not carry the allowed request:\n%s", all)
	}
}
