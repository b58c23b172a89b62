package testkit_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func TestContextHasADeadline(t *testing.T) {
	ctx := testkit.Context(t, "the answer")
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > testkit.Timeout {
		t.Errorf("Context deadline = %v (set %v), want within %v", deadline, ok, testkit.Timeout)
	}
}

func TestExitReturnsTheProcessStatus(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := testkit.Exit(t, cmd, "sh")
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Exit(sh -c 'exit 3') = %v, want exit status 3", err)
	}
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := testkit.Recv(t, ch, "a number"); got != 7 {
		t.Errorf("Recv = %d, want 7", got)
	}
}

func TestNextSaysWhenTheChannelClosed(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	close(ch)
	if v, ok := testkit.Next(t, ch, "a number"); v != 7 || !ok {
		t.Errorf("Next = %d, %v, want 7, true", v, ok)
	}
	if v, ok := testkit.Next(t, ch, "a number"); v != 0 || ok {
		t.Errorf("Next on a closed channel = %d, %v, want 0, false", v, ok)
	}
}

func TestPollEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the test is over"))
	if err := testkit.Poll(ctx, func() bool { return false }); err == nil || err.Error() != "the test is over" {
		t.Errorf("Poll(cancelled ctx, never) = %v, want the context's cause", err)
	}
	n := 0
	if err := testkit.Poll(context.Background(), func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Errorf("Poll(third time holds) = %v after %d calls, want nil after 3", err, n)
	}
}
