package kit

import (
	"context"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
)

// TestRunnerLingersThenExits checks both sides of the prompt runner's
// linger: prompts that follow each other reuse one runner, and a prompt
// that comes after the runner has exited starts a new one.
func TestRunnerLingersThenExits(t *testing.T) {
	defer func(d time.Duration) { runnerLinger = d }(runnerLinger)
	runnerLinger = 20 * time.Millisecond
	b := newBox(t, agent.Func(func(_ context.Context, t agent.Turn) (string, error) { return "ok " + t.ID(), nil }))
	c := b.dial("/", b.auth())
	defer c.close()

	runnerGone := func() bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			b.srv.mu.Lock()
			busy := false
			for _, ss := range b.srv.sessions {
				ss.prompts.mu.Lock()
				busy = busy || ss.prompts.runner
				ss.prompts.mu.Unlock()
			}
			b.srv.mu.Unlock()
			if !busy {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		c.prompt(id, "x")
		if m := last(c.finish(id)); m["type"] != "complete" || m["message"] != "ok "+id {
			t.Fatalf("prompt %s ended with %v", id, m)
		}
		if !runnerGone() {
			t.Fatalf("after prompt %s the runner did not exit within its linger", id)
		}
	}
}
