package kit

import (
	"context"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestRunnerLingersThenExits checks both sides of the prompt runner's
// linger: prompts that follow each other reuse one runner, and a prompt
// that comes after the runner has exited starts a new one.
func TestRunnerLingersThenExits(t *testing.T) {
	b := newBox(t, agent.Func(func(_ context.Context, t agent.Turn) (string, error) { return "ok " + t.ID(), nil }),
		func(_ *protocol.Manifest, o *Options) { o.runnerLinger = 20 * time.Millisecond })
	c := b.dial("/", b.auth())
	defer c.close()

	runnerGone := func() bool {
		b.srv.mu.Lock()
		defer b.srv.mu.Unlock()
		for _, ss := range b.srv.sessions {
			ss.prompts.mu.Lock()
			busy := ss.prompts.runner
			ss.prompts.mu.Unlock()
			if busy {
				return false
			}
		}
		return true
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		c.prompt(id, "x")
		if m := last(c.finish(id)); m["type"] != "complete" || m["message"] != "ok "+id {
			t.Fatalf("prompt %s ended with %v", id, m)
		}
		testkit.Until(t, "the runner to exit after its linger, after prompt "+id, runnerGone)
	}
}
