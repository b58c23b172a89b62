package client_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
)

// answer runs a prompt and returns its complete message.
func answer(t *testing.T, b *client.Box, text string) string {
	t.Helper()
	ctx := testkit.Context(t, "a prompt's answer")
	r, err := b.Prompt(ctx, text, client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(done.Message)
}

// TestKitSnapshotRestoreFork: a session's snapshot restores as a new
// session a second client attaches to; a fork gives sessions holding the
// same files.
func TestKitSnapshotRestoreFork(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	// One client, a Box (a session) per endpoint: its cleanup checks that
	// no Box's goroutine outlives Close.
	eps := map[string]client.Endpoint{}
	for _, n := range []string{"src", "restored", "fork0", "fork1"} {
		eps[n] = client.Endpoint{URL: url, Key: testKey}
	}
	c, err := client.New(eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		checkNoGoroutines(t)
	})
	box := func(name string) *client.Box {
		b, err := c.Box(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := box("src")
	ctx := testkit.Context(t, "snapshots")
	answer(t, b, "mkdir -p d && printf kept > d/f && ln -s d/f l")
	info, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if info.Session != b.SessionID() || info.Entries != 3 {
		t.Errorf("Snapshot = %+v, want 3 entries of %s", info, b.SessionID())
	}
	list, err := b.Snapshots(ctx)
	if err != nil || len(list.Snapshots) != 1 || list.Snapshots[0].ID != info.ID {
		t.Fatalf("Snapshots = %+v, %v", list, err)
	}
	if m, err := b.SnapshotManifest(ctx, info.ID); err != nil || len(m.Entries) != 3 {
		t.Fatalf("SnapshotManifest = %+v, %v", m, err)
	}
	res, err := b.Restore(ctx, info.ID, false)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	r := box("restored")
	if err := r.Attach(res.Session); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, r, "cat l"); got != "kept" {
		t.Errorf("restored session: cat l = %q, want kept", got)
	}
	if r.SessionID() != res.Session {
		t.Errorf("attached to %s, want %s", r.SessionID(), res.Session)
	}
	if err := r.Attach("again"); err == nil {
		t.Errorf("Attach on a Box with a session succeeded")
	}

	fr, err := b.Fork(ctx, b.SessionID(), 2)
	if err != nil || len(fr.Sessions) != 2 {
		t.Fatalf("Fork = %+v, %v", fr, err)
	}
	for i, id := range fr.Sessions {
		f := box(fmt.Sprintf("fork%d", i))
		f.Attach(id)
		if got := answer(t, f, "cat d/f"); got != "kept" {
			t.Errorf("fork %s: cat d/f = %q", id, got)
		}
	}
	if err := b.DeleteSnapshot(ctx, info.ID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, err := b.Restore(ctx, info.ID, false); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Restore of a deleted snapshot = %v, want a 404", err)
	}
}
