package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// startRulesKit serves a real kit whose policy allows outside.test only
// (and lets sessions open api.outside.test); every name resolves to a
// documentation address the test's guard opens, dialled to a loopback
// server.
func startRulesKit(t *testing.T) (url string, port int) {
	t.Helper()
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", r.Host)
	}))
	t.Cleanup(outside.Close)
	port = outside.Listener.Addr().(*net.TCPAddr).Port
	m, err := protocol.ParseManifest([]byte(`{"name":"testbox","version":"1.2.3","network":{"default":"deny","allow":["outside.test"],"session_may_allow":["api.outside.test"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(testKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kit.New(kit.Options{
		Manifest: m, Key: testKey, Root: t.TempDir(), PublicURL: "http://" + ln.Addr().String(), Agent: exec.New(),
		Logger:  testkit.Logger(t, slog.LevelWarn),
		Getenv:  func(string) string { return "" },
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Egress: kit.EgressOptions{
			Guard: netguard.New(netguard.Options{Open: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}}),
			Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, outside.Listener.Addr().String())
			},
		},
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		srv.Close(context.Background())
		if err := <-done; err != nil && !errors.Is(err, kit.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "ws://" + ln.Addr().String() + "/", port
}

// TestKitSessionEgress: WithEgress narrows a session before its first
// prompt; SetEgress widens it within session_may_allow during it; the
// box reports the effective policy; bad rules are refused.
func TestKitSessionEgress(t *testing.T) {
	url, port := startRulesKit(t)
	b := kitBox(t, url, client.WithEgress(protocol.NetworkSpec{Default: "deny"}))
	ctx := testkit.Context(t, "the box's answers")
	curl := func(host string) string {
		t.Helper()
		r, err := b.Prompt(ctx, fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}' http://%s:%d/", host, port), client.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done, err := r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(done.Message)
	}
	if got := curl("outside.test"); got != "451" {
		t.Errorf("narrowed at open: outside.test = %s, want 451", got)
	}
	if v := b.Egress(); v == nil || v.Session == nil || v.Session.Default != "deny" {
		t.Errorf("Egress() = %+v, want the session's rules", v)
	}
	v, err := b.SetEgress(ctx, protocol.NetworkSpec{Allow: []string{"api.outside.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Session == nil || v.Session.Allow[0] != "api.outside.test" || v.SessionMayAllow[0] != "api.outside.test" {
		t.Errorf("SetEgress = %+v", v)
	}
	if got := curl("api.outside.test"); got != "200" {
		t.Errorf("widened within session_may_allow: api.outside.test = %s, want 200", got)
	}
	if got := curl("outside.test"); got != "200" {
		t.Errorf("outside.test = %s, want 200 (the session's default is the box's)", got)
	}
	if _, err := b.SetEgress(ctx, protocol.NetworkSpec{Allow: []string{"*.*"}}); err == nil || !strings.Contains(err.Error(), "allow[0]") {
		t.Errorf("SetEgress with a bad rule = %v", err)
	}
	if _, err := b.SetEgress(ctx, protocol.NetworkSpec{}); err != nil {
		t.Errorf("clearing: %v", err)
	}
	if got := curl("api.outside.test"); got != "451" {
		t.Errorf("cleared: api.outside.test = %s, want 451", got)
	}
}

// TestKitSetEgressFirst: SetEgress as the first call on a Box opens the
// session and applies the rules before any prompt.
func TestKitSetEgressFirst(t *testing.T) {
	url, port := startRulesKit(t)
	b := kitBox(t, url, client.WithEgress(protocol.NetworkSpec{Deny: []string{"api.outside.test"}}))
	ctx := testkit.Context(t, "the box's answers")
	v, err := b.SetEgress(ctx, protocol.NetworkSpec{Default: "deny"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Session == nil || v.Session.Default != "deny" {
		t.Fatalf("SetEgress = %+v", v)
	}
	r, err := b.Prompt(ctx, fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}' http://outside.test:%d/", port), client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r.Wait(ctx); err != nil || strings.TrimSpace(done.Message) != "451" {
		t.Errorf("outside.test after SetEgress default deny = %v %v, want 451", done, err)
	}
}
