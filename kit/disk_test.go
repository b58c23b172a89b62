package kit

import (
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestDiskLimitStopsWriter: limits.disk stops a prompt while it writes,
// not when it ends: a writer of 1GB (in files each under the per-file
// limit) under a 64MB limit is killed near the limit, and the prompt ends
// with a LimitError naming limits.disk. Files in the session's private
// /tmp count.
func TestDiskLimitStopsWriter(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		tmp        bool
	}{
		{"work directory", `i=0; while [ $i -lt 64 ]; do dd if=/dev/zero of=f$i bs=1M count=16 2>/dev/null || exit 9; i=$((i+1)); done; echo finished`, false},
		// 40MB in each: neither alone is over the limit, the two are.
		{"work and /tmp", `dd if=/dev/zero of=/tmp/t bs=1M count=40 2>/dev/null && dd if=/dev/zero of=w bs=1M count=40 2>/dev/null && sleep 20; echo finished`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
				m.Limits.Disk = "64MB"
				m.Limits.Timeout = "2m"
			})
			if tc.tmp && !b.srv.sb.Report().Has(sandbox.LayerMount) {
				t.Skip("no mount namespace: /tmp is the box's")
			}
			c := b.dial("/", nil)
			c.prompt("w", tc.text)
			fs := c.finish("w")
			m := last(fs)
			msg, _ := m["error"].(map[string]any)["message"].(string)
			if errCode(m) != protocol.CodeLimit || !strings.Contains(msg, "limits.disk") || !strings.Contains(msg, "stopped") {
				t.Fatalf("prompt = %v, want a LimitError saying limits.disk stopped it", m)
			}
			for _, e := range ofType(fs, "event") {
				if d, _ := e["data"].(map[string]any); strings.Contains(d["text"].(string), "finished") {
					t.Errorf("the writer finished: %v", e)
				}
			}
			t.Logf("stopped at: %s", msg)

			// The session goes on; its next prompt may delete files.
			c.prompt("clean", "rm -f f* w /tmp/t; echo cleaned")
			if m := last(c.finish("clean")); m["type"] != "complete" {
				t.Errorf("the next prompt = %v, want complete", m)
			}
			sid := c.hello["session_id"].(string)
			if used := treeSize(b.root + "/work/" + sid); used != 0 {
				t.Errorf("the work directory holds %d bytes after the clean-up", used)
			}
		})
	}
}
