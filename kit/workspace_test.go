package kit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestSandboxOpenFails: a session whose sandbox cannot be set up (here:
// every session uid is taken) fails its prompt with a clear error, leaves
// no directory behind when it ends, and the box keeps serving. A failed
// Open once left the workspace half made, and the session's end crashed
// the kit on it.
func TestSandboxOpenFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("session uids need root")
	}
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) {
		m.Sandbox = &protocol.SandboxSpec{UIDCount: 1}
	})
	first := b.dial("/", nil)
	first.prompt("p1", "echo one")
	if f := last(first.finish("p1")); f["type"] != "complete" {
		t.Fatalf("first session's prompt = %v, want complete", f)
	}

	second := b.dial("/", nil)
	id, _ := second.hello["session_id"].(string)
	for _, p := range []string{"p1", "p2"} { // the second attempt fails the same way
		second.prompt(p, "echo two")
		f := last(second.finish(p))
		msg, _ := f["error"].(map[string]any)["message"].(string)
		if f["type"] != "error" || !strings.Contains(msg, "sandbox") || !strings.Contains(msg, "uid") {
			t.Fatalf("prompt %s on a session without a uid = %v, want an error naming the sandbox's uids", p, f)
		}
	}
	second.close()
	testkit.Until(t, "the failed session's directories removed", func() bool {
		_, err := os.Stat(filepath.Join(b.root, "work", id))
		return os.IsNotExist(err)
	})

	first.prompt("p2", "echo still")
	if f := last(first.finish("p2")); f["type"] != "complete" {
		t.Fatalf("first session after the failure = %v, want complete", f)
	}
}
