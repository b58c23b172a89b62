package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	gexec "github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// egressKit is a real kit whose agents run real curl through its egress
// proxy. Every *.test name resolves (through the proxy's seam) to a
// documentation address the test opens in the kit's address table, which
// the dialer seam maps to a loopback server answering "hello".
type egressKit struct {
	url  string
	srv  *kit.Server
	port int // the outside server's
}

func startEgressKit(t testing.TB, spec protocol.NetworkSpec, root string) *egressKit {
	t.Helper()
	return startEgressKitWith(t, spec, root, gexec.New(gexec.WithGrace(100*time.Millisecond)))
}

func startEgressKitWith(t testing.TB, spec protocol.NetworkSpec, root string, ag agent.Agent) *egressKit {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the egress tests need curl")
	}
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", r.Host)
	}))
	t.Cleanup(outside.Close)
	ek := &egressKit{port: outside.Listener.Addr().(*net.TCPAddr).Port}
	m, err := protocol.ParseManifest([]byte(`{"name":"testbox","version":"1.2.3"}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(testKey)
	m.Network = &spec
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ek.srv, err = kit.New(kit.Options{
		Manifest: m, Key: testKey, Root: root, PublicURL: "http://" + ln.Addr().String(), Agent: ag,
		Logger:  testkit.Logger(t, slog.LevelWarn),
		Getenv:  func(string) string { return "" },
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Egress: kit.EgressOptions{
			Guard: netguard.New(netguard.Options{Open: []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}}),
			Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
				if !strings.HasSuffix(host, ".test") {
					return nil, errors.New("no such host")
				}
				return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
			},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr != fmt.Sprintf("203.0.113.7:%d", ek.port) {
					return nil, fmt.Errorf("test dialer: only the outside server, not %s", addr)
				}
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
	go func() { done <- ek.srv.Serve(context.Background(), ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ek.srv.Close(context.Background())
			if err := <-done; err != nil && !errors.Is(err, kit.ErrClosed) {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	ek.url = "ws://" + ln.Addr().String() + "/"
	return ek
}

// curlPrompt runs curl on each host in one prompt, answering each ask it
// gets with the next of answers ("" leaves it unanswered), and returns
// the HTTP codes curl printed and the asks seen.
func curlPrompt(t *testing.T, ctx context.Context, b *client.Box, port int, hosts []string, answers ...string) (codes string, asks []protocol.EgressAsk) {
	t.Helper()
	var script strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&script, "curl -s -o /dev/null -w '%%{http_code} ' http://%s:%d/\n", h, port)
	}
	r, err := b.Prompt(ctx, script.String(), client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for d := range r.Display(ctx) {
		ask, ok := client.EgressAsk(d)
		if !ok {
			continue
		}
		asks = append(asks, ask)
		if len(answers) == 0 {
			t.Fatalf("an ask more than expected: %+v", ask)
		}
		a := answers[0]
		answers = answers[1:]
		if a == "" {
			continue
		}
		if err := r.AnswerEgress(ctx, d.SlotID, a); err != nil {
			t.Fatal(err)
		}
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) > 0 {
		t.Errorf("%d answers left over: fewer asks than expected (%+v)", len(answers), asks)
	}
	return strings.TrimSpace(done.Message), asks
}

// TestEgressAskOverWebSocket: with ask on and a deny default, a real
// client answers the kit's egress asks over its WebSocket, and each
// answer decides: once (this connection only), session (remembered for
// the session, one ask for two connections), box (the live policy gains
// the rule at once: another session is not asked), deny (remembered for
// the session too), and no answer (the ask times out and denies). The audit trail, followed while it
// happens, records each with its answer.
func TestEgressAskOverWebSocket(t *testing.T) {
	ek := startEgressKit(t, protocol.NetworkSpec{Default: "deny", Allow: []string{"allowed.test"}, Ask: true, AskTimeout: "3s"}, t.TempDir())
	b := kitBox(t, ek.url)
	ctx := testkit.Context(t, "the egress asks")

	followed, stopFollow := followEgressLog(t, ctx, b)
	defer stopFollow()

	// A rule covers it: no ask.
	if codes, asks := curlPrompt(t, ctx, b, ek.port, []string{"allowed.test"}); codes != "200" || len(asks) != 0 {
		t.Fatalf("allowed.test: codes %q, asks %+v; want 200 and no ask", codes, asks)
	}
	// Once: allowed, and asked again next time (then denied).
	codes, asks := curlPrompt(t, ctx, b, ek.port, []string{"once.test"}, protocol.EgressAskOnce)
	if codes != "200" || len(asks) != 1 {
		t.Fatalf("once.test: codes %q, asks %+v", codes, asks)
	}
	a := asks[0]
	want := fmt.Sprintf("once.test:%d", ek.port)
	if a.Host != "once.test" || a.Port != ek.port || a.Message != "the agent wants "+want || a.Line != fmt.Sprintf("allow = [%q]", want) ||
		a.TimeoutMS != 3000 || !slices.Equal(a.Choices, protocol.EgressAskChoices) {
		t.Errorf("ask = %+v", a)
	}
	if codes, _ := curlPrompt(t, ctx, b, ek.port, []string{"once.test"}, protocol.EgressAskDeny); codes != "451" {
		t.Errorf("once.test denied: codes %q, want 451", codes)
	}
	// A denial is remembered: the agent retrying does not ask again.
	if codes, asks := curlPrompt(t, ctx, b, ek.port, []string{"once.test"}); codes != "451" || len(asks) != 0 {
		t.Errorf("once.test again: codes %q, asks %d; want 451 and no ask", codes, len(asks))
	}
	// Session: one ask for two connections.
	if codes, asks := curlPrompt(t, ctx, b, ek.port, []string{"sess.test", "sess.test"}, protocol.EgressAskSession); codes != "200 200" || len(asks) != 1 {
		t.Errorf("sess.test: codes %q, asks %d; want 200 200 and one ask", codes, len(asks))
	}
	// Box: the live policy gains the rule.
	if codes, _ := curlPrompt(t, ctx, b, ek.port, []string{"box.test"}, protocol.EgressAskBox); codes != "200" {
		t.Errorf("box.test: codes %q", codes)
	}
	boxRule := fmt.Sprintf("box.test:%d", ek.port)
	env := getJSON(t, ctx, ek, "/egress")
	if !strings.Contains(env, fmt.Sprintf("%q", boxRule)) {
		t.Errorf("GET /egress = %s, want %q in allow", env, boxRule)
	}
	// No answer: the ask times out and denies.
	if codes, asks := curlPrompt(t, ctx, b, ek.port, []string{"quiet.test"}, ""); codes != "451" || len(asks) != 1 {
		t.Errorf("quiet.test: codes %q, asks %d; want 451 after one ask", codes, len(asks))
	}
	// Another session: box.test needs no ask now, sess.test asks again.
	c2, err := client.New(map[string]client.Endpoint{"kit": {URL: ek.url, Key: testKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close() // before kitBox's check that no client goroutine is left
	b2, _ := c2.Box("kit")
	if codes, asks := curlPrompt(t, ctx, b2, ek.port, []string{"box.test", "sess.test"}, protocol.EgressAskDeny); codes != "200 451" || len(asks) != 1 || asks[0].Host != "sess.test" {
		t.Errorf("second session: codes %q, asks %+v; want 200 451 and sess.test asked", codes, asks)
	}

	wantLines := []string{
		`allowed.test allow allowed.test  allow = ["allowed.test"]`,
		fmt.Sprintf(`once.test allow once.test:%d once allow = ["once.test:%[1]d"]`, ek.port),
		"once.test deny ask: deny deny ",
		"once.test deny ask: deny deny ",
		fmt.Sprintf(`sess.test allow sess.test:%d session allow = ["sess.test:%[1]d"]`, ek.port),
		fmt.Sprintf(`sess.test allow sess.test:%d session allow = ["sess.test:%[1]d"]`, ek.port),
		fmt.Sprintf(`box.test allow box.test:%d box allow = ["box.test:%[1]d"]`, ek.port),
		"quiet.test deny ask: timeout timeout ",
		fmt.Sprintf(`box.test allow box.test:%d  allow = ["box.test:%[1]d"]`, ek.port),
		"sess.test deny ask: deny deny ",
	}
	checkAuditTrail(t, followed, wantLines)
	metrics := getJSON(t, ctx, ek, "/metrics")
	for _, w := range []string{`glovebox_egress_asks_total{answer="once"} 1`, `glovebox_egress_asks_total{answer="session"} 2`,
		`glovebox_egress_asks_total{answer="box"} 1`, `glovebox_egress_asks_total{answer="deny"} 3`, `glovebox_egress_asks_total{answer="timeout"} 1`,
		`glovebox_egress_audit_records_total 10`, `glovebox_egress_decisions_total{decision="deny"} 4`} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
}

// followEgressLog follows b's egress audit trail until stop is called,
// each line sent on the channel.
func followEgressLog(t *testing.T, ctx context.Context, b *client.Box) (<-chan protocol.EgressEvent, func()) {
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan protocol.EgressEvent, 100)
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		for ev, err := range b.EgressLog(fctx, client.EgressLogOptions{Follow: true}) {
			if err != nil {
				if fctx.Err() == nil {
					t.Errorf("follow: %v", err)
				}
				return
			}
			followed <- ev
		}
	}()
	return followed, func() { stopFollow(); <-followDone }
}

// checkAuditTrail reads as many lines from the followed trail as want
// has and checks them: in order, each allowed one with its bytes and
// address.
func checkAuditTrail(t *testing.T, followed <-chan protocol.EgressEvent, wantLines []string) {
	t.Helper()
	var got []string
	var last uint64
	for len(got) < len(wantLines) {
		ev := testkit.Recv(t, followed, "the followed egress log's next line")
		if ev.Seq != last+1 {
			t.Errorf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		got = append(got, fmt.Sprintf("%s %s %s %s %s", ev.Host, ev.Decision, ev.Rule, ev.Ask, ev.Line))
		if ev.Decision == "allow" && (ev.BytesIn == 0 || ev.BytesOut == 0 || len(ev.Addrs) != 1 || ev.Addrs[0] != "203.0.113.7") {
			t.Errorf("line %d: bytes %d/%d, addrs %v; want both ways counted and the address", ev.Seq, ev.BytesOut, ev.BytesIn, ev.Addrs)
		}
	}
	if strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("audit trail:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLines, "\n"))
	}
}

// getJSON GETs a route of the kit with its key and returns the body.
func getJSON(t *testing.T, ctx context.Context, ek *egressKit, path string) string {
	t.Helper()
	u := "http://" + strings.TrimSuffix(strings.TrimPrefix(ek.url, "ws://"), "/") + path
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	return string(body)
}

// TestEgressAuditRereadAfterRestart: the trail is kept on the state
// volume; a kit started again on it serves the old lines and numbers the
// new ones after them. An audit token reads it; a connect token cannot.
func TestEgressAuditRereadAfterRestart(t *testing.T) {
	root := t.TempDir()
	ctx := testkit.Context(t, "the egress log")
	spec := protocol.NetworkSpec{Default: "deny", Allow: []string{"allowed.test"}}
	ek := startEgressKit(t, spec, root)
	b := kitBox(t, ek.url)
	if codes, _ := curlPrompt(t, ctx, b, ek.port, []string{"allowed.test", "denied.test"}); codes != "200 451" {
		t.Fatalf("codes %q", codes)
	}
	before := readLog(t, ctx, b, client.EgressLogOptions{})
	if len(before) != 2 {
		t.Fatalf("before the restart: %d lines, want 2", len(before))
	}
	ek.srv.Close(ctx)
	if matches, _ := filepath.Glob(filepath.Join(root, "var/glovebox/egress-audit/audit.jsonl")); len(matches) != 1 {
		t.Fatalf("no audit file under the state dir: %v", matches)
	}

	ek2 := startEgressKit(t, spec, root)
	b2 := kitBox(t, ek2.url)
	if codes, _ := curlPrompt(t, ctx, b2, ek2.port, []string{"denied.test"}); codes != "451" {
		t.Fatalf("codes %q", codes)
	}
	after := readLog(t, ctx, b2, client.EgressLogOptions{})
	if len(after) != 3 || after[2].Seq != 3 {
		t.Fatalf("after the restart: %+v, want the 2 old lines and the new one numbered 3", after)
	}
	for i := range before {
		x, _ := json.Marshal(before[i])
		y, _ := json.Marshal(after[i])
		if string(x) != string(y) {
			t.Errorf("line %d changed across the restart:\n%s\n%s", i+1, x, y)
		}
	}
	if got := readLog(t, ctx, b2, client.EgressLogOptions{AfterSeq: 2}); len(got) != 1 || got[0].Host != "denied.test" {
		t.Errorf("since=2: %+v", got)
	}

	for scope, want := range map[string]bool{protocol.ScopeAudit: true, protocol.ScopeAdmin: true, protocol.ScopeConnect: false, protocol.ScopeLogs: false} {
		tok, err := protocol.MintToken(testKey, protocol.TokenClaims{Scopes: []string{scope}, Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(map[string]client.Endpoint{"kit": {URL: ek2.url, Key: tok}})
		if err != nil {
			t.Fatal(err)
		}
		tb, _ := c.Box("kit")
		var n int
		var lerr error
		for _, err := range tb.EgressLog(ctx, client.EgressLogOptions{}) {
			if err != nil {
				lerr = err
				break
			}
			n++
		}
		c.Close()
		if want && (lerr != nil || n != 3) || !want && (lerr == nil || !strings.Contains(lerr.Error(), "401")) {
			t.Errorf("a %s token: %d lines, %v", scope, n, lerr)
		}
	}
}

func readLog(t *testing.T, ctx context.Context, b *client.Box, o client.EgressLogOptions) []protocol.EgressEvent {
	t.Helper()
	var out []protocol.EgressEvent
	for ev, err := range b.EgressLog(ctx, o) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}
