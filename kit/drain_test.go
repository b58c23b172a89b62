package kit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestDrainTimeUp drains a box whose prompt never ends: Drain gives up
// when its context does, and Close then cuts the prompt (AbortError).
func TestDrainTimeUp(t *testing.T) {
	started := make(chan struct{})
	ag := agent.Func(func(ctx context.Context, _ agent.Turn) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	b := newBox(t, ag)
	c := b.dial("/", b.auth())
	defer c.close()
	c.prompt("forever", "run")
	testkit.Wait(t, started, "the prompt to start")

	ctx, cancel := context.WithTimeout(testkit.Context(t, "Drain"), 200*time.Millisecond)
	defer cancel()
	if err := b.srv.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain = %v, want the context's deadline: the prompt never ends", err)
	}
	if m := c.until(func(m map[string]any) bool { return m["type"] == "draining" }); last(m)["deadline"] == nil {
		t.Errorf("draining frame %v has no deadline", last(m))
	}
	closed := make(chan error, 1)
	go func() { closed <- b.srv.Close(testkit.Context(t, "Close")) }()
	if m := last(c.finish("forever")); errCode(m) != protocol.CodeAborted {
		t.Errorf("the prompt after the drain time = %v, want AbortError", m)
	}
	if err := testkit.Recv(t, closed, "Close"); err != nil {
		t.Errorf("Close = %v", err)
	}
}
