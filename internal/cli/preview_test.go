package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestPreviewCommand: gbx preview PORT prints the session's preview URL
// (the box's only session, or --session), ls lists it, revoke ends it.
func TestPreviewCommand(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t","preview":{"domain":"preview.test","http":true}}`)
	env := boxEnv(url, key)
	if _, _, err := runGbx(t, env, t.TempDir(), "preview", "8000"); err == nil || !strings.Contains(err.Error(), "no live session") {
		t.Errorf("preview with no session = %v, want an error saying so", err)
	}
	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	ctx, cancel := context.WithCancel(testkit.Context(t, "the sleeping prompt"))
	defer cancel()
	r, err := b.Prompt(ctx, "echo started; sleep 60", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e := range r.Events(ctx) {
		if e.Type == "text_delta" {
			break // the session is open
		}
	}
	env2, err := b.Environment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(env2.Capabilities, " "), protocol.CapPreview) {
		t.Skipf("the box serves no previews here: %v", env2.Capabilities)
	}
	stdout, stderr, err := runGbx(t, env, t.TempDir(), "preview", "--ttl", "5m", "8000")
	urlRE := regexp.MustCompile(`^http://([a-z0-9]+)\.preview\.test(:\d+)?/\?glovebox_preview=gbp1\.\S+\n$`)
	m := urlRE.FindStringSubmatch(stdout)
	if err != nil || m == nil || !strings.Contains(stderr, "port 8000 of session "+b.SessionID()) {
		t.Fatalf("preview 8000 = %q, %q, %v; want the URL on stdout and what it opens on stderr", stdout, stderr, err)
	}
	id := m[1]
	stdout, _, err = runGbx(t, env, t.TempDir(), "preview", "ls", "--session", b.SessionID())
	if err != nil || !regexp.MustCompile(`(?m)^`+id+`\s+8000\s+\S+\s+http://`+id+`\.preview\.test`).MatchString(stdout) {
		t.Errorf("preview ls = %q, %v; want the link", stdout, err)
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "preview", "ls", "--json")
	var l protocol.PreviewList
	if err != nil || json.Unmarshal([]byte(stdout), &l) != nil || len(l.Previews) != 1 || l.Previews[0].Link != "" {
		t.Errorf("preview ls --json = %q, %v", stdout, err)
	}
	if _, stderr, err := runGbx(t, env, t.TempDir(), "preview", "revoke", id); err != nil || !strings.Contains(stderr, "revoked "+id) {
		t.Errorf("preview revoke = %q, %v", stderr, err)
	}
	if stdout, _, err := runGbx(t, env, t.TempDir(), "preview", "ls"); err != nil || stdout != "no preview links\n" {
		t.Errorf("preview ls after revoke = %q, %v", stdout, err)
	}
	for _, bad := range [][]string{{"preview"}, {"preview", "0"}, {"preview", "x"}, {"preview", "--ttl", "soon", "80"}, {"preview", "revoke"}, {"preview", "ls", "extra"}} {
		if _, _, err := runGbx(t, env, t.TempDir(), bad...); err == nil {
			t.Errorf("gbx %s: no error", strings.Join(bad, " "))
		}
	}
	cancel()
	r.Wait(context.Background())
}
