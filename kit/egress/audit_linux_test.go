package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestAuditTrailCurl: real curl, through the proxy, to a test host in a
// network namespace: a forwarded request, a CONNECT tunnel and a block,
// each one line of the audit trail's file, checked field by field.
func TestAuditTrailCurl(t *testing.T) {
	tn := newTestNet(t)
	serveHello(t, tn.listen(t, netip.AddrPortFrom(tn.Peer, 80).String()), "the test host")
	dir := t.TempDir()
	j, err := OpenJournal(JournalOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	dl := &dialLog{net: tn.subnet, net6: tn.subnet6}
	g := netguard.New(netguard.Options{Open: []netip.Prefix{tn.subnet}, Ports: func() ([]int, error) { return nil, nil }})
	peer := tn.Peer.String()
	b := startBoxWith(t, protocol.NetworkSpec{Default: "deny", Allow: []string{"api.test"}, Deny: []string{"evil.test"}},
		Options{Guard: g, Dial: dl.dial, Audit: j, Resolve: fakeDNS(map[string][]string{"api.test": {peer}, "other.test": {peer}, "evil.test": {peer}})})

	start := time.Now()
	for _, args := range [][]string{
		{"-sS", "http://api.test/"},
		{"-sS", "-p", "http://api.test/"}, // a CONNECT tunnel
		{"-sS", "http://other.test/"},
		{"-sS", "http://evil.test/"},
	} {
		out, errOut, err := b.run(t, "curl", args...)
		if err != nil {
			t.Fatalf("curl %v: %v %s", args, err, errOut)
		}
		if strings.Contains(args[len(args)-1], "api.test") != strings.Contains(out, "hello from the test host") {
			t.Errorf("curl %v: %q", args, out)
		}
		b.next(t) // the decision is recorded once the connection ended
	}
	j.Close()
	data, err := os.ReadFile(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines in the file, want 4:\n%s", len(lines), data)
	}
	want := []map[string]any{
		{"seq": 1.0, "session": "s1", "proto": "http", "host": "api.test", "port": 80.0, "addrs": []any{peer}, "decision": "allow", "rule": "api.test", "line": `allow = ["api.test"]`},
		{"seq": 2.0, "session": "s1", "proto": "connect", "host": "api.test", "port": 80.0, "addrs": []any{peer}, "decision": "allow", "rule": "api.test", "line": `allow = ["api.test"]`},
		{"seq": 3.0, "session": "s1", "proto": "http", "host": "other.test", "port": 80.0, "decision": "deny", "rule": `default = "deny"`, "line": `default = "deny"`},
		{"seq": 4.0, "session": "s1", "proto": "http", "host": "evil.test", "port": 80.0, "decision": "deny", "rule": "evil.test", "line": `deny = ["evil.test"]`},
	}
	for i, l := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		for k, w := range want[i] {
			if fmt.Sprint(got[k]) != fmt.Sprint(w) {
				t.Errorf("line %d: %s = %v, want %v", i+1, k, got[k], w)
			}
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["time"]))
		if err != nil || ts.Before(start.Add(-time.Second)) || ts.After(time.Now()) {
			t.Errorf("line %d: time %v", i+1, got["time"])
		}
		if _, ok := got["reason"].(string); !ok {
			t.Errorf("line %d has no reason", i+1)
		}
		allowed := got["decision"] == "allow"
		out, _ := got["bytes_out"].(float64)
		in, _ := got["bytes_in"].(float64)
		if allowed && (out < 20 || in < 20) || !allowed && (out != 0 || in != 0) {
			t.Errorf("line %d: bytes out %v, in %v", i+1, got["bytes_out"], got["bytes_in"])
		}
		if _, ok := got["brokered"]; ok {
			t.Errorf("line %d: brokered %v, want none", i+1, got["brokered"])
		}
	}
}

// TestAuditBrokered: a brokered request's line names its secret and says
// it was scrubbed when the host sent the value back.
func TestAuditBrokered(t *testing.T) {
	o := startOutside(t)
	j, _ := OpenJournal(JournalOptions{})
	b := startBoxWith(t, protocol.NetworkSpec{Default: "deny", Allow: []string{"api.outside.test"}}, Options{
		Guard: testGuard, Resolve: fakeDNS(testDNS), Dial: loopbackDial, RootCAs: o.roots, Audit: j,
		Secrets: []Secret{{Name: "ANTHROPIC_API_KEY", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key", Port: o.httpsPort}},
	})
	ph := b.p.Placeholders()["ANTHROPIC_API_KEY"]
	out, errOut, err := b.run(t, "curl", "-sS", "-H", "x-api-key: "+ph, fmt.Sprintf("https://api.outside.test:%d/v1/messages", o.httpsPort))
	if err != nil {
		t.Fatalf("curl: %v %s %s", err, out, errOut)
	}
	b.next(t)
	lines, _, _ := j.Since(Query{})
	if len(lines) != 1 {
		t.Fatalf("%d lines", len(lines))
	}
	var ev Event
	json.Unmarshal(lines[0], &ev)
	if ev.Proto != "https" || fmt.Sprint(ev.Brokered) != "[ANTHROPIC_API_KEY]" || ev.Line != `allow = ["api.outside.test"]` || len(ev.Addrs) != 1 {
		t.Errorf("line = %s", lines[0])
	}
}

// TestAskAtTheProxy: the proxy asks only about connections the default
// decides, and an approval still cannot open a closed address.
func TestAskAtTheProxy(t *testing.T) {
	o := startOutside(t)
	pol, _ := NewPolicy(protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test"}, Deny: []string{"blocked.test"}, Ask: true})
	p, err := New(Options{Policy: pol, Guard: testGuard, Resolve: fakeDNS(testDNS), Dial: loopbackDial, RootCAs: o.roots})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 10)
	ask := func(ctx context.Context, host string, port int) string {
		asked <- fmt.Sprintf("%s:%d", host, port)
		return protocol.EgressAskOnce
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	events := make(chan Event, 10)
	go func() { done <- p.Serve(ctx, ln, Session{ID: "s", Sink: func(e Event) { events <- e }, Ask: ask}) }()
	defer func() { cancel(); testkit.Recv(t, done, "Serve's end") }()
	for _, tc := range []struct {
		host     string
		code     int
		asked    bool
		ruleWant string
	}{
		{"outside.test", 200, false, "outside.test"},
		{"blocked.test", 451, false, "blocked.test"},
		{"other.test", 200, true, fmt.Sprintf("other.test:%d", o.httpPort)},
		{"rebind.test", 451, true, "built-in: cloud metadata"}, // resolves to the metadata address
	} {
		code, _ := through(t, ln.Addr().String(), "http", tc.host, o.httpPort)
		ev := testkit.Recv(t, events, "the decision")
		if code != tc.code || ev.Rule != tc.ruleWant {
			t.Errorf("%s: %d, rule %q; want %d, %q", tc.host, code, ev.Rule, tc.code, tc.ruleWant)
		}
		select {
		case a := <-asked:
			if !tc.asked {
				t.Errorf("%s: asked (%s), but a rule covers it", tc.host, a)
			}
		default:
			if tc.asked {
				t.Errorf("%s: not asked", tc.host)
			}
		}
	}
}
