package client_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// proxy is a TCP relay between the client and a kit whose connections the
// test can cut, as a flaky network or a suspended machine does.
type proxy struct {
	ln      net.Listener
	mu      sync.Mutex
	target  string
	conns   []net.Conn
	wg      sync.WaitGroup
	swallow chan struct{} // when non-nil, client bytes are dropped and this is signalled
}

// swallowUpstream makes the proxy drop what the client sends from now on,
// as a socket that died without either side noticing yet does; the
// returned channel receives once per dropped read.
func (p *proxy) swallowUpstream() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.swallow = make(chan struct{}, 64)
	return p.swallow
}

func newProxy(t *testing.T) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.relay(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) setTarget(wsURL string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = strings.TrimSuffix(strings.TrimPrefix(wsURL, "ws://"), "/")
}

func (p *proxy) relay(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	d, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, d)
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer d.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				p.mu.Lock()
				sw := p.swallow
				p.mu.Unlock()
				if sw != nil {
					select {
					case sw <- struct{}{}:
					default:
					}
				} else if _, werr := d.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	io.Copy(c, d)
	c.Close()
	wg.Wait()
}

// cut closes every relayed connection at once, both sides, with no close
// frame: the kit and the client each see their socket drop.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.swallow = nil
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) url() string { return "ws://" + p.ln.Addr().String() + "/" }

// gatedAgent emits "before", waits for the test to open its gate, emits
// "after" and completes.
func gatedAgent(gate <-chan struct{}) agent.Agent {
	return agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		if err := turn.Emit("step", map[string]string{"at": "before"}); err != nil {
			return "", err
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if err := turn.Emit("step", map[string]string{"at": "after"}); err != nil {
			return "", err
		}
		return "done " + turn.Text(), nil
	})
}

func TestKitResumeAfterDrop(t *testing.T) {
	p := newProxy(t)
	gate := make(chan struct{})
	kitURL, _ := startKit(t, gatedAgent(gate), "http://"+p.ln.Addr().String())
	p.setTarget(kitURL)
	b := kitBox(t, p.url(), client.WithReconnect(10, 0), client.WithLogger(testkit.Logger(t, slog.LevelInfo)))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "p1", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull(r.Events(ctx))
	defer stop()
	first, ok := next()
	if !ok || string(first.Data) != `{"at":"before"}` {
		t.Fatalf("first event = %+v, %v", first, ok)
	}
	p.cut() // the socket drops mid-prompt
	close(gate)
	var rest []string
	for {
		e, ok := next()
		if !ok {
			break
		}
		rest = append(rest, string(e.Data))
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait after a drop = %v, want the prompt to survive through resume", err)
	}
	if done.Message != "done p1" {
		t.Errorf("message = %q", done.Message)
	}
	if !slices.Equal(rest, []string{`{"at":"after"}`}) {
		t.Errorf("events after the drop = %v, want exactly the one missed", rest)
	}
}

func TestKitResumeRefused(t *testing.T) {
	p := newProxy(t)
	gate := make(chan struct{})
	kit1, _ := startKit(t, gatedAgent(gate), "http://"+p.ln.Addr().String())
	p.setTarget(kit1)
	b := kitBox(t, p.url(), client.WithReconnect(10, 0), client.WithLogger(testkit.Logger(t, slog.LevelInfo)))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "p1", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events(ctx) {
		break
	}
	// The box restarts elsewhere: the new kit knows nothing of the session.
	open := make(chan struct{})
	close(open)
	kit2, _ := startKit(t, gatedAgent(open), "http://"+p.ln.Addr().String())
	p.setTarget(kit2)
	p.cut()
	if _, err := r.Wait(ctx); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Wait = %v, want ErrConnectionLost", err)
	}
	// The box goes on with a fresh session on the new kit.
	r2, err := b.Prompt(ctx, "p2", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r2.Wait(ctx); err != nil || done.Message != "done p2" {
		t.Errorf("prompt on the new session = %+v, %v", done, err)
	}
	close(gate)
}

func TestKitGoneFailsAfterBoundedAttempts(t *testing.T) {
	p := newProxy(t)
	gate := make(chan struct{})
	kitURL, _ := startKit(t, gatedAgent(gate), "http://"+p.ln.Addr().String())
	p.setTarget(kitURL)
	b := kitBox(t, p.url(), client.WithReconnect(3, time.Millisecond))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "p1", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events(ctx) {
		break
	}
	// The box becomes unreachable: every redial fails.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead.Close()
	p.setTarget("ws://" + dead.Addr().String() + "/")
	p.cut()
	_, err = r.Wait(ctx)
	if !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Wait = %v, want ErrConnectionLost after the attempts ran out", err)
	}
	// Once the box is back, the next prompt connects again.
	close(gate)
	p.setTarget(kitURL)
	r2, err := b.Prompt(ctx, "p2", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r2.Wait(ctx); err != nil || done.Message != "done p2" {
		t.Errorf("prompt after the box came back = %+v, %v", done, err)
	}
}

func TestKitLazyResumeKeepsSession(t *testing.T) {
	p := newProxy(t)
	kitURL, _ := startKit(t, exec.New(), "http://"+p.ln.Addr().String())
	p.setTarget(kitURL)
	b := kitBox(t, p.url())
	ctx := testkit.Context(t, "the box's answers")
	run := func(cmd string) string {
		t.Helper()
		r, err := b.Prompt(ctx, cmd, client.PromptOptions{DiscardEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		done, err := r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return done.Message
	}
	run("echo kept > note")
	p.cut() // no prompt in flight: the box redials on the next use
	if got := run("cat note"); got != "kept\n" {
		t.Errorf("after the drop, the session's work directory has note = %q, want the same session resumed", got)
	}
}

func TestKitResumeResendsALostPrompt(t *testing.T) {
	p := newProxy(t)
	kitURL, _ := startKit(t, exec.New(), "http://"+p.ln.Addr().String())
	p.setTarget(kitURL)
	b := kitBox(t, p.url())
	ctx := testkit.Context(t, "the box's answers")
	warm, err := b.Prompt(ctx, "true", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The prompt frame leaves the client but never reaches the box; then
	// the socket drops.
	swallowed := p.swallowUpstream()
	r, err := b.Prompt(ctx, "echo ran once >> log; cat log", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, swallowed, "the prompt frame to reach the proxy")
	p.cut()
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait = %v, want the lost prompt sent again after the resume", err)
	}
	if done.Message != "ran once\n" {
		t.Errorf("message = %q, want the command to have run exactly once", done.Message)
	}
}

// TestKitDraining drains a real kit behind a proxy while a prompt runs:
// the host app's callback gets the deadline (and points the proxy at a
// second kit, as a load balancer would), Box.Draining says so, a new
// prompt on the draining session fails with code Draining, the running
// one completes, and the next prompt opens a session on the second kit.
func TestKitDraining(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	ag := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		if turn.Text() != "slow" {
			return "from the first kit", nil
		}
		close(started)
		select {
		case <-release:
			return "slow done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	first, srv := startKit(t, ag, "")
	second, _ := startKit(t, agent.Func(func(context.Context, agent.Turn) (string, error) { return "from the second kit", nil }), "")
	p := newProxy(t)
	p.setTarget(first)
	told := make(chan time.Time, 1)
	b := kitBox(t, p.url(), client.WithOnDraining(func(box string, deadline time.Time) {
		if box == "kit" {
			p.setTarget(second) // the load balancer moves away
			told <- deadline
		}
	}))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "slow", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, started, "the slow prompt to start")

	drainCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- srv.Drain(drainCtx) }()
	deadline := testkit.Recv(t, told, "the draining callback")
	if want, _ := drainCtx.Deadline(); deadline.UnixMilli() != want.UnixMilli() {
		t.Errorf("callback deadline = %v, want the drain's %v", deadline, want)
	}
	if d, ok := b.Draining(); !ok || !d.Equal(deadline) {
		t.Errorf("Draining() = %v, %v, want %v, true", d, ok, deadline)
	}
	r2, err := b.Prompt(ctx, "again", client.PromptOptions{})
	if err == nil {
		_, err = r2.Wait(ctx)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != protocol.CodeDraining {
		t.Errorf("prompt while draining: %v, want an *Error with code %s", err, protocol.CodeDraining)
	}
	close(release)
	c, err := r.Wait(ctx)
	if err != nil || c.Message != "slow done" {
		t.Fatalf("running prompt: %+v, %v, want it completed", c, err)
	}
	if err := testkit.Recv(t, drained, "Drain to return"); err != nil {
		t.Errorf("Drain = %v, want nil once nothing runs", err)
	}
	r3, err := b.Prompt(ctx, "next", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := r3.Wait(ctx); err != nil || c.Message != "from the second kit" {
		t.Errorf("prompt after the drain: %+v, %v, want it answered by the second kit", c, err)
	}
	if _, ok := b.Draining(); ok {
		t.Error("Draining() still true on the new session")
	}
}
