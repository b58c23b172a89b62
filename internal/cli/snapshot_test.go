package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestSnapshotRestoreForkCommands: gbx snapshot, snapshots, restore,
// prompt --session, fork and snapshots rm against a real kit, on a
// session a client holds.
func TestSnapshotRestoreForkCommands(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	gbx := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := runGbx(t, env, t.TempDir(), args...)
		if err != nil {
			t.Fatalf("gbx %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return strings.TrimSpace(stdout)
	}
	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	ctx := testkit.Context(t, "the held session's prompt")
	r, err := b.Prompt(ctx, "mkdir d && printf kept > d/f", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}

	id := gbx("snapshot", b.SessionID())
	if !protocol.ValidSnapshotID(id) {
		t.Fatalf("gbx snapshot printed %q, want a snapshot id", id)
	}
	if ls := gbx("snapshots"); !strings.Contains(ls, id) || !strings.Contains(ls, b.SessionID()) {
		t.Errorf("gbx snapshots:\n%s", ls)
	}
	if show := gbx("snapshots", "show", id); !strings.Contains(show, "work/d/f") {
		t.Errorf("gbx snapshots show:\n%s", show)
	}
	restored := gbx("restore", id)
	if out := gbx("prompt", "--session", restored, "cat d/f"); !strings.Contains(out, "kept") {
		t.Errorf("gbx prompt --session %s: %q, want the restored file", restored, out)
	}
	forks := strings.Fields(gbx("fork", "-n", "2", b.SessionID()))
	if len(forks) != 2 {
		t.Fatalf("gbx fork -n 2 printed %v", forks)
	}
	if out := gbx("prompt", "--session", forks[1], "cat d/f"); !strings.Contains(out, "kept") {
		t.Errorf("gbx prompt --session %s (a fork): %q", forks[1], out)
	}
	gbx("snapshots", "rm", id)
	var l protocol.SnapshotList
	if err := json.Unmarshal([]byte(gbx("snapshots", "--json")), &l); err != nil || len(l.Snapshots) != 0 {
		t.Errorf("gbx snapshots --json after rm = %+v, %v", l, err)
	}
	if _, stderr, err := runGbx(t, env, t.TempDir(), "restore", id); err == nil || !strings.Contains(stderr+err.Error(), "404") {
		t.Errorf("gbx restore of a removed snapshot = %v %s, want a 404", err, stderr)
	}
}
