package testkit

// Bounded waits. Every wait in a test (a prompt's answer, a process's
// exit, a socket's next frame) takes a Context from here, so a hang fails
// that test within Timeout, with a message naming what it waited for,
// instead of stalling the package until go test's 10-minute alarm.

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// Timeout bounds a single wait. It is far above what any wait takes on a
// loaded 2-core machine under -race, and far below the package timeout.
const Timeout = 30 * time.Second

// Context returns a context that ends after Timeout, or when the test
// ends. Its cause says what the test gave up waiting for, so an error
// built with context.Cause names it: "gave up after 30s waiting for the
// prompt's answer".
func Context(t testing.TB, what string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), Timeout,
		fmt.Errorf("gave up after %v waiting for %s", Timeout, what))
	t.Cleanup(cancel)
	return ctx
}

// Wait fails the test unless done is closed within Timeout.
func Wait(t testing.TB, done <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("gave up after %v waiting for %s", Timeout, what)
	}
}

// Until polls cond every few milliseconds until it holds, and fails the
// test if it does not within Timeout.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if Poll(context.Background(), cond) != nil {
		t.Fatalf("gave up after %v waiting for %s", Timeout, what)
	}
}

// Poll polls cond every few milliseconds until it holds, and returns nil;
// or, after Timeout or when ctx ends, the cause. It fails no test, so it
// serves goroutines other than the test's and cleanups, which report
// with t.Errorf.
func Poll(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeoutCause(ctx, Timeout, fmt.Errorf("gave up after %v", Timeout))
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// Goroutines waits, at most Timeout, for the number of goroutines to fall
// back to before (runtime.NumGoroutine taken before the code under test
// started), and fails the test with every goroutine's stack if it does
// not. Call it after Close: what Close waited for may still be returning.
func Goroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutines: %d after Close, %d before; they are:\n%s", runtime.NumGoroutine(), before, buf)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Recv receives one value from ch, failing the test unless one comes (or
// ch closes) within Timeout.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("gave up after %v waiting for %s", Timeout, what)
		panic("unreachable")
	}
}

// Next is Recv for a channel that may close: ok is false when it did.
func Next[T any](t testing.TB, ch <-chan T, what string) (v T, ok bool) {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v, ok = <-ch:
		return v, ok
	case <-timer.C:
		t.Fatalf("gave up after %v waiting for %s", Timeout, what)
		panic("unreachable")
	}
}

// Exit waits for the started cmd to exit and returns what cmd.Wait
// returns. A process still running after Timeout is killed, and the test
// fails.
func Exit(t testing.TB, cmd *exec.Cmd, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("gave up after %v waiting for %s to exit; killed it", Timeout, what)
		return nil
	}
}
