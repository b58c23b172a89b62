package kit

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestFinishedIDs checks that a session whose client can resume refuses a
// prompt id that already ran (a resend must not run twice), while a v1
// client may reuse an id once its prompt has ended, as v1 allowed.
func TestFinishedIDs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hello    bool
		wantRuns int64
		wantLast string
	}{
		{"resume client", true, 1, "error"},
		{"v1 client", false, 2, "complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int64
			b := newBox(t, agent.Func(func(context.Context, agent.Turn) (string, error) {
				runs.Add(1)
				return "ran", nil
			}))
			c := b.dial("/", nil)
			defer c.close()
			if tc.hello {
				c.send(map[string]any{"type": "hello", "capabilities": []string{"resume"}})
			}
			c.prompt("p1", "x")
			if m := last(c.finish("p1")); m["type"] != "complete" {
				t.Fatalf("first run ended with %v", m)
			}
			c.prompt("p1", "x")
			m := last(c.finish("p1"))
			if m["type"] != tc.wantLast {
				t.Fatalf("second prompt p1 ended with %v, want %s", m, tc.wantLast)
			}
			if tc.wantLast == "error" && errCode(m) != protocol.CodeDuplicateID {
				t.Errorf("code = %s, want %s", errCode(m), protocol.CodeDuplicateID)
			}
			if got := runs.Load(); got != tc.wantRuns {
				t.Errorf("the agent ran %d times, want %d", got, tc.wantRuns)
			}
		})
	}
}
