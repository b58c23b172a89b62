//go:build linux

package kit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestSessionTmpWithoutMountNamespace: where sessions have no mount
// namespace (Docker's defaults, Kubernetes, a non-root kit), each gets a
// TMPDIR of its own under the state directory, which its prompts can
// write, another session cannot reach, limits.disk counts, and the
// session's end removes.
func TestSessionTmpWithoutMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, as the kit runs in its image")
	}
	// Session uids must reach their directories without a mount
	// namespace: a root the test's own 0700 temporary directory is not.
	root, err := os.MkdirTemp("/var/tmp", "kit-tmp-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newBox(t, exec.New(), func(m *protocol.Manifest, o *Options) {
		m.Sandbox = &protocol.SandboxSpec{Mount: new(false), AllowDegraded: true}
		m.Limits.Disk = "1MB"
		o.Root = root
	})
	c := b.dial("/", nil)
	c.prompt("p", `echo hi > "$TMPDIR/note" && cat "$TMPDIR/note"; echo "dir=$TMPDIR"`)
	m := last(c.finish("p"))
	if m["type"] != "complete" {
		t.Fatalf("prompt = %v", m)
	}
	out, _ := m["message"].(string)
	tmpRoot := filepath.Join(b.srv.stateDir, "tmp")
	dir := strings.TrimSpace(out[strings.Index(out, "dir=")+len("dir="):])
	if !strings.HasPrefix(out, "hi\n") || filepath.Dir(dir) != tmpRoot {
		t.Fatalf("the prompt said %q; want hi from a TMPDIR under %s", out, tmpRoot)
	}

	// Another session cannot reach it.
	o := b.dial("/", nil)
	o.prompt("q", `cat "`+dir+`/note" 2>/dev/null && echo READ; ls "`+tmpRoot+`" 2>/dev/null | grep . && echo LISTED; echo done`)
	if got, _ := last(o.finish("q"))["message"].(string); got != "done\n" {
		t.Errorf("another session: %q, want only done", got)
	}

	// limits.disk counts it.
	c.prompt("big", `head -c 600000 /dev/zero > "$TMPDIR/a"; head -c 600000 /dev/zero > "$TMPDIR/b"; echo wrote`)
	if e := last(c.finish("big")); e["type"] != "error" || e["error"].(map[string]any)["code"] != protocol.CodeLimit {
		t.Errorf("writing 1.2 MB into TMPDIR under a 1 MiB limit: %v, want a %s error", e, protocol.CodeLimit)
	}

	c.close()
	o.close()
	b.srv.Close(t.Context())
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the session's TMPDIR %s outlived the kit: %v", dir, err)
	}
}
