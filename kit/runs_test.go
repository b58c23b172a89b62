package kit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// runKey is the run records' public key as a client finds it: in
// /environment (which shows the manifest's).
func runKey(t *testing.T, b *box) ed25519.PublicKey {
	t.Helper()
	resp, body := b.get("/environment", b.auth())
	var env protocol.Environment
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &env) != nil || env.Runs == nil {
		t.Fatalf("GET /environment = %d %s, want the runs block", resp.StatusCode, body)
	}
	if env.Runs.PublicKey != protocol.RunPublicKey(b.key) {
		t.Fatalf("/environment runs.public_key = %s, want RunPublicKey(key) %s", env.Runs.PublicKey, protocol.RunPublicKey(b.key))
	}
	pub, err := protocol.ParseRunPublicKey(env.Runs.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// chainOf fetches a session's chain.
func chainOf(t *testing.T, b *box, session string, h http.Header) []protocol.SignedRun {
	t.Helper()
	resp, body := b.get("/runs?session="+session, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /runs?session= = %d %s", resp.StatusCode, body)
	}
	var c protocol.RunChain
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	return c.Records
}

func runOf(t *testing.T, s protocol.SignedRun) *protocol.RunRecord {
	t.Helper()
	r, err := s.Run()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestRunRecordsChain(t *testing.T) {
	b := newBox(t, scripted(nil))
	pub := runKey(t, b)
	c := b.dial("/", nil)
	session := c.hello["session_id"].(string)
	c.send(map[string]any{"type": "prompt", "id": "p1", "text": "echo hi", "inputs": map[string]any{"in.txt": inline("input bytes")}})
	c.finish("p1")
	c.prompt("p2", "write out/a.txt 5")
	c.finish("p2")
	c.prompt("p3", "fail")
	if e := last(c.finish("p3")); e["type"] != "error" {
		t.Fatalf("p3 = %v, want an error", e)
	}

	recs := chainOf(t, b, session, b.auth())
	if len(recs) != 3 {
		t.Fatalf("chain has %d records, want 3", len(recs))
	}
	if err := protocol.VerifyRunChain(pub, recs); err != nil {
		t.Fatalf("VerifyRunChain = %v", err)
	}
	r1, r2, r3 := runOf(t, recs[0]), runOf(t, recs[1]), runOf(t, recs[2])
	if r1.Prompt != "p1" || r1.PromptDigest != sum("echo hi") || r1.PromptText != "" || r1.Outcome != "complete" {
		t.Errorf("p1's record = %+v", r1)
	}
	if got, want := r1.Inputs["in.txt"], (protocol.RunFile{SHA256: sum("input bytes"), Size: 11}); got != want {
		t.Errorf("p1's input = %+v, want %+v", got, want)
	}
	if got, want := r2.Outputs["out/a.txt"], (protocol.RunFile{SHA256: sum("xxxxx"), Size: 5}); got != want {
		t.Errorf("p2's output = %+v, want %+v", got, want)
	}
	if r3.Outcome != protocol.CodeAgent || r3.Seq != 3 || r3.Session != session || r3.Agent != "exec" || r3.ManifestDigest == "" {
		t.Errorf("p3's record = %+v", r3)
	}

	// One record, by its prompt id.
	resp, body := b.get("/runs/p2", b.auth())
	one, err := protocol.DecodeSignedRun(body)
	if resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /runs/p2 = %d %s", resp.StatusCode, body)
	}
	if err := one.Verify(pub); err != nil || one.Digest != recs[1].Digest {
		t.Errorf("GET /runs/p2: Verify = %v, digest %s, want the chain's second %s", err, one.Digest, recs[1].Digest)
	}

	// Tampered: each refused, saying what.
	var ve *protocol.RunVerifyError
	changed := recs[1]
	changed.Record = []byte(strings.Replace(string(changed.Record), sum("xxxxx"), sum("yyyyy"), 1))
	if err := changed.Verify(pub); !errors.As(err, &ve) || strings.Join(ve.Fields, ",") != "outputs/out/a.txt" {
		t.Errorf("a changed output digest: Verify = %v, want it named", err)
	}
	var ce *protocol.RunChainError
	if err := protocol.VerifyRunChain(pub, []protocol.SignedRun{recs[0], recs[2]}); !errors.As(err, &ce) || ce.At != 2 {
		t.Errorf("a dropped record: VerifyRunChain = %v, want broken at 2", err)
	}
	if err := protocol.VerifyRunChain(pub, []protocol.SignedRun{recs[1], recs[0], recs[2]}); !errors.As(err, &ce) || ce.At != 1 {
		t.Errorf("reordered: VerifyRunChain = %v, want broken at 1", err)
	}
	other, _ := protocol.ParseRunPublicKey(protocol.RunPublicKey(protocol.NewKey()))
	if err := protocol.VerifyRunChain(other, recs); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Errorf("another box's key: VerifyRunChain = %v, want refused", err)
	}
}

func TestRunRecordsAuth(t *testing.T) {
	b := newBox(t, scripted(nil))
	mint := b.tokenFor
	alice := mint("alice", protocol.ScopeConnect)
	c := b.dial("/", bearer(alice))
	c.prompt("p1", "echo hi")
	c.finish("p1")
	session := c.hello["session_id"].(string)
	for _, tc := range []struct {
		name string
		h    http.Header
		want int
	}{
		{"none", nil, http.StatusUnauthorized},
		{"the key", b.auth(), http.StatusOK},
		{"the session's credential", bearer(alice), http.StatusOK},
		{"the same subject", bearer(mint("alice", protocol.ScopeConnect)), http.StatusOK},
		{"another subject", bearer(mint("bob", protocol.ScopeConnect)), http.StatusNotFound},
		{"runs", bearer(mint("", protocol.ScopeRuns)), http.StatusOK},
		{"admin", bearer(mint("", protocol.ScopeAdmin)), http.StatusOK},
		{"files", bearer(mint("", protocol.ScopeFiles)), http.StatusUnauthorized},
		{"a wrong key", bearer("nope"), http.StatusUnauthorized},
	} {
		for _, path := range []string{"/runs/p1", "/runs?session=" + session} {
			if resp, body := b.get(path, tc.h); resp.StatusCode != tc.want {
				t.Errorf("%s: GET %s = %d %s, want %d", tc.name, path, resp.StatusCode, body, tc.want)
			}
		}
	}
	if resp, _ := b.get("/runs", b.auth()); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /runs = %d, want 400", resp.StatusCode)
	}
}

func TestRunRecordsTextAndTimeout(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
		m.Runs = &protocol.RunsSpec{RecordText: true}
		m.Limits.Timeout = "200ms"
		m.Provenance = &protocol.Provenance{ClosureSHA256: strings.Repeat("c1", 32), ClosurePaths: 3}
	})
	c := b.dial("/", nil)
	c.prompt("p1", "block")
	if e := last(c.finish("p1")); errCode(e) != protocol.CodeTimeout {
		t.Fatalf("p1 = %v, want a timeout", e)
	}
	recs := chainOf(t, b, c.hello["session_id"].(string), b.auth())
	if err := protocol.VerifyRunChain(runKey(t, b), recs); err != nil {
		t.Fatal(err)
	}
	r := runOf(t, recs[0])
	if r.PromptText != "block" || strings.Join(r.Limits, ",") != "timeout" || r.Outcome != protocol.CodeTimeout {
		t.Errorf("record = %+v, want the text and the timeout", r)
	}
	if r.ClosureHash != strings.Repeat("c1", 32) {
		t.Errorf("record's closure_hash = %q, want the manifest provenance's closure_sha256", r.ClosureHash)
	}
}

func TestRunRecordsWrongManifestKey(t *testing.T) {
	key := protocol.NewKey()
	m := testManifest(key)
	m.Runs = &protocol.RunsSpec{PublicKey: protocol.RunPublicKey(protocol.NewKey())}
	_, err := New(Options{Manifest: m, Key: key, Root: t.TempDir(), Agent: scripted(nil), Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "runs.public_key") {
		t.Errorf("New with another box's runs.public_key = %v, want a boot error", err)
	}
}

func TestRunRecordsKeptAcrossRestart(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	c.prompt("p1", "echo hi")
	c.finish("p1")
	session := c.hello["session_id"].(string)
	want := chainOf(t, b, session, b.auth())

	// A second kit on the same state dir.
	o := b.srv.opts
	o.Logger = testLogger(t)
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(t.Context())
	b2 := &box{t: t, srv: srv, key: b.key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	b2.url = "http://" + ln.Addr().String()
	got := chainOf(t, b2, session, b.auth())
	if len(got) != 1 || got[0].Digest != want[0].Digest {
		t.Errorf("after a restart: %d records, want %s", len(got), fmt.Sprint(want[0].Digest))
	}
}

func TestRunRecordEgress(t *testing.T) {
	b, outside, _ := egressBox(t)
	port := outside.Listener.Addr().(*net.TCPAddr).Port
	c := b.dial("/", nil)
	c.prompt("p1", fmt.Sprintf(`curl -sS http://outside.test:%d/ ; curl -sS http://blocked.test:%d/`, port, port))
	c.finish("p1")
	recs := chainOf(t, b, c.hello["session_id"].(string), b.auth())
	if err := protocol.VerifyRunChain(runKey(t, b), recs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range runOf(t, recs[0]).Egress {
		got = append(got, d.Host+" "+d.Decision+" "+d.Rule)
	}
	if want := []string{"outside.test allow outside.test", `blocked.test deny default = "deny"`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the record's egress = %q, want %q", got, want)
	}
}

func TestRunRecordLimitHit(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Limits.Disk = "1MB"
	})
	c := b.dial("/", nil)
	c.prompt("big", "dd if=/dev/zero of=f bs=1M count=8 2>/dev/null; sleep 5")
	if e := last(c.finish("big")); errCode(e) != protocol.CodeLimit {
		t.Fatalf("big = %v, want a %s", e, protocol.CodeLimit)
	}
	recs := chainOf(t, b, c.hello["session_id"].(string), b.auth())
	if err := protocol.VerifyRunChain(runKey(t, b), recs); err != nil {
		t.Fatal(err)
	}
	if r := runOf(t, recs[0]); strings.Join(r.Limits, ",") != "disk" || r.Outcome != protocol.CodeLimit {
		t.Errorf("record = %+v, want limits [disk]", r)
	}
}

// TestRunRecordsBounded: over their memory bound, a session's oldest
// records are dropped, in memory and in its file, and its chain goes on
// from the last one: a verifier is told the start is missing.
func TestRunRecordsBounded(t *testing.T) {
	b := newBox(t, scripted(nil))
	b.srv.runs.maxBytes = 6000 // about four records
	c := b.dial("/", nil)
	session := c.hello["session_id"].(string)
	for i := range 8 {
		id := fmt.Sprintf("p%d", i)
		c.prompt(id, "echo "+id)
		c.finish(id)
	}
	recs := chainOf(t, b, session, b.auth())
	if len(recs) < 2 || len(recs) > 5 {
		t.Fatalf("%d records kept, want the latest few of 8", len(recs))
	}
	first := runOf(t, recs[0])
	if last := runOf(t, recs[len(recs)-1]); last.Seq != 8 || first.Seq != int64(9-len(recs)) {
		t.Errorf("kept seq %d to %d, want the latest ending at 8", first.Seq, last.Seq)
	}
	var ce *protocol.RunChainError
	if err := protocol.VerifyRunChain(runKey(t, b), recs); !errors.As(err, &ce) || ce.At != 1 || !strings.Contains(err.Error(), "does not start") {
		t.Errorf("VerifyRunChain of the kept records = %v, want the missing start reported", err)
	}
	// The file holds the same records.
	data, err := os.ReadFile(b.srv.runs.file(session))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != len(recs) {
		t.Errorf("the session's file holds %d records, memory %d", n, len(recs))
	}
}

// TestRunRecordIgnoresForgedExit: an exit event an agent process sent as
// raw JSON (an ACP agent's session update named "exit") names neither the
// record's exit code nor its limits.
func TestRunRecordIgnoresForgedExit(t *testing.T) {
	b := newBox(t, agent.Func(func(ctx context.Context, tt agent.Turn) (string, error) {
		return "", tt.Emit("exit", json.RawMessage(`{"code":7,"limit":"memory"}`))
	}))
	c := b.dial("/", nil)
	c.prompt("p1", "go")
	c.finish("p1")
	recs := chainOf(t, b, c.hello["session_id"].(string), b.auth())
	if len(recs) != 1 {
		t.Fatalf("chain has %d records, want 1", len(recs))
	}
	if r := runOf(t, recs[0]); len(r.Limits) != 0 || r.ExitCode != nil {
		t.Errorf("record = limits %v, exit code %v; want neither from a raw exit event", r.Limits, r.ExitCode)
	}
}

// TestRunRecordsExpiredKeepALiveSessionsHead: when a live session's
// records pass their TTL they go, but its chain goes on from the last
// one: its next record is not a new chain's first, which would hide the
// dropped prompts from a verifier.
func TestRunRecordsExpiredKeepALiveSessionsHead(t *testing.T) {
	b := newBox(t, scripted(nil))
	b.srv.runs.init(b.srv)
	b.srv.runs.ttl = time.Millisecond
	a, other := b.dial("/", nil), b.dial("/", nil)
	// Records are signed after their prompt ends; GET /runs waits for
	// them: each step below starts once the last record is sealed.
	a.prompt("p1", "echo one")
	a.finish("p1")
	chainOf(t, b, a.hello["session_id"].(string), b.auth())
	time.Sleep(5 * time.Millisecond) // past the TTL of p1's record
	other.prompt("q1", "echo other")
	other.finish("q1")
	chainOf(t, b, other.hello["session_id"].(string), b.auth()) // q1's sealing dropped p1's record
	a.prompt("p2", "echo two")
	a.finish("p2")
	recs := chainOf(t, b, a.hello["session_id"].(string), b.auth())
	if len(recs) != 1 {
		t.Fatalf("chain has %d records, want p2's only", len(recs))
	}
	if r := runOf(t, recs[0]); r.Prompt != "p2" || r.Seq != 2 {
		t.Errorf("record = %s seq %d, want p2 seq 2", r.Prompt, r.Seq)
	}
	var ce *protocol.RunChainError
	if err := protocol.VerifyRunChain(runKey(t, b), recs); !errors.As(err, &ce) || ce.At != 1 {
		t.Errorf("VerifyRunChain = %v, want the missing start reported", err)
	}
}
