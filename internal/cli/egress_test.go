package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestEgressSet: gbx egress set and show replace and show a live
// session's own rules through the admin route, and say what is wrong.
func TestEgressSet(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t","network":{"default":"allow","session_may_allow":["pypi.org"]}}`)
	env := boxEnv(url, key)
	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	ctx := testkit.Context(t, "the session")
	r, err := b.Prompt(ctx, "true", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := b.Sessions(ctx)
	if err != nil || len(l.Sessions) != 1 {
		t.Fatalf("sessions = %+v, %v", l, err)
	}
	id := l.Sessions[0].ID

	stdout, stderr, err := runGbx(t, env, t.TempDir(), "egress", "set", "--session", id, "--default", "deny", "--allow", "api.example.com", "--allow", "pypi.org:443")
	if err != nil {
		t.Fatalf("egress set: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "session:  default deny, allow [api.example.com, pypi.org:443], deny []") || !strings.Contains(stdout, "sessions may allow [pypi.org]") {
		t.Errorf("egress set printed:\n%s", stdout)
	}
	if v := b.Egress(); v == nil {
		t.Error("the session's client has no egress view")
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "egress", "show", "--session", id, "--json")
	var v protocol.EgressEnvironment
	if err != nil || json.Unmarshal([]byte(stdout), &v) != nil || v.Session == nil || v.Session.Default != "deny" || len(v.Session.Allow) != 2 {
		t.Errorf("egress show --json = %q, %v", stdout, err)
	}
	if stdout, _, err := runGbx(t, env, t.TempDir(), "egress", "set", "--session", id, "--clear"); err != nil || !strings.Contains(stdout, "no rules of its own") {
		t.Errorf("egress set --clear = %q, %v", stdout, err)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"egress", "set", "--default", "deny"}, "needs --session"},
		{[]string{"egress", "set", "--session", id}, "needs rules"},
		{[]string{"egress", "set", "--session", id, "--allow", "*.*"}, "allow[0]"},
		{[]string{"egress", "set", "--session", id, "--clear", "--deny", "x.com"}, "--clear takes no rules"},
		{[]string{"egress", "set", "--session", "nosuch", "--deny", "x.com"}, "no session nosuch"},
		{[]string{"egress", "frob"}, `no subcommand "frob"`},
	} {
		_, _, err := runGbx(t, env, t.TempDir(), tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gbx %v = %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
	token := mintFor(t, key, protocol.ScopeConnect)
	if _, _, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": token}, t.TempDir(), "egress", "show", "--session", id); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("egress show with a connect token = %v, want unauthorized", err)
	}
}
