package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestEgressLogCommand: gbx egress log reads a box's audit trail as text,
// as JSON and by session, and gbx egress suggest turns it into allow lines.
func TestEgressLogCommand(t *testing.T) {
	url, key := testBox(t, `{"name":"t","network":{"default":"deny","allow":["allowed.invalid"]}}`)
	env := boxEnv(url, key)
	// Denied by the default without a lookup: no traffic leaves.
	if _, stderr, err := runGbx(t, env, t.TempDir(), "prompt", "curl -s -o /dev/null -w '%{http_code}' http://blocked.invalid/; curl -s -o /dev/null http://blocked.invalid:8080/"); err != nil {
		t.Fatalf("prompt: %v\n%s", err, stderr)
	}
	stdout, _, err := runGbx(t, env, t.TempDir(), "egress", "log")
	if err != nil {
		t.Fatalf("egress log: %v", err)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "     1 ") || !strings.Contains(lines[0], `deny  http    blocked.invalid:80 rule="default = \"deny\"" session=`) {
		t.Errorf("egress log:\n%s", stdout)
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "egress", "log", "--json", "--since", "1")
	var ev protocol.EgressEvent
	if err != nil || json.Unmarshal([]byte(stdout), &ev) != nil || ev.Seq != 2 || ev.Port != 8080 || ev.Line != `default = "deny"` {
		t.Errorf("egress log --json --since 1 = %q, %v", stdout, err)
	}
	if stdout, _, err := runGbx(t, env, t.TempDir(), "egress", "log", "--session", "nobody"); err != nil || stdout != "" {
		t.Errorf("egress log --session nobody = %q, %v", stdout, err)
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "egress", "suggest")
	if err != nil || !strings.Contains(stdout, "[network]\nallow = [\n") || !strings.Contains(stdout, `  # "blocked.invalid:80",   # blocked by the default (1)`) {
		t.Errorf("egress suggest = %q, %v", stdout, err)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "egress", "log", "--since", "tuesday"); !errors.Is(err, ErrUsage) {
		t.Errorf("--since tuesday: %v, want a usage error", err)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "egress", "tail"); !errors.Is(err, ErrUsage) {
		t.Errorf("egress tail: %v, want a usage error", err)
	}
	audit := mintFor(t, key, protocol.ScopeAudit)
	if _, _, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": audit}, t.TempDir(), "egress", "log"); err != nil {
		t.Errorf("egress log with an audit token: %v", err)
	}
	logsTok := mintFor(t, key, protocol.ScopeLogs)
	if _, _, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": logsTok}, t.TempDir(), "egress", "log"); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("egress log with a logs token: %v, want unauthorized", err)
	}
}

// TestSuggestions: approvals come first, for the box before sessions,
// then what was blocked, commented out.
func TestSuggestions(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []protocol.EgressEvent{
		{Seq: 1, Time: at, Host: "pypi.org", Port: 443, Decision: "deny", Rule: `default = "deny"`},
		{Seq: 2, Time: at, Host: "pypi.org", Port: 443, Decision: "deny", Rule: `default = "deny"`},
		{Seq: 3, Time: at, Host: "api.github.com", Port: 443, Decision: "allow", Rule: "api.github.com:443", Ask: "session"},
		{Seq: 4, Time: at, Host: "example.com", Port: 80, Decision: "allow", Rule: "example.com:80", Ask: "box"},
		{Seq: 5, Time: at, Host: "example.com", Port: 80, Decision: "allow", Rule: "example.com:80"},
		{Seq: 6, Time: at, Host: "evil.test", Port: 443, Decision: "deny", Rule: "ask: timeout", Ask: "timeout"},
		{Seq: 7, Time: at, Host: "ok.test", Port: 443, Decision: "allow", Rule: "ok.test"},
		{Seq: 8, Time: at, Host: "::1", Port: 80, Decision: "deny", Rule: `default = "deny"`},
	}
	var b strings.Builder
	writeSuggestions(&b, evs)
	want := `# Add the lines you want to glovebox.toml; approvals for the box are in force only until the box restarts.
[network]
allow = [
  "example.com:80",   # approved for the box (1); last 2026-01-02T03:04:05Z
  "api.github.com:443",   # approved for a session (1); last 2026-01-02T03:04:05Z
  # "pypi.org:443",   # blocked by the default (2); last 2026-01-02T03:04:05Z
  # "[::1]:80",   # blocked by the default (1); last 2026-01-02T03:04:05Z
  # "evil.test:443",   # asked, no answer (1); last 2026-01-02T03:04:05Z
]
`
	if b.String() != want {
		t.Errorf("suggestions:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeSuggestions(&b, evs[6:7])
	if !strings.Contains(b.String(), "suggests nothing") {
		t.Errorf("nothing to suggest: %q", b.String())
	}
}
