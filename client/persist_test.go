package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// servePersistent serves a kit whose sessions persist, on root, and
// returns its WebSocket URL and a func that stops it as SIGTERM would.
func servePersistent(t *testing.T, root, publicURL string) (string, func()) {
	t.Helper()
	m, err := protocol.ParseManifest([]byte(`{"name":"persistbox","version":"1.0.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(testKey)
	m.Sessions = &protocol.SessionsSpec{Persist: true, ResumeGrace: "1h"}
	none := 0
	m.Agent = &protocol.AgentSpec{Type: protocol.AgentExec, Warm: &none}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := kit.New(kit.Options{
		Manifest: m, Key: testKey, Root: root, PublicURL: publicURL, Agent: exec.New(),
		Logger: testkit.Logger(t, slog.LevelWarn), Getenv: func(string) string { return "" },
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		srv.Close(context.Background())
		if err := <-done; err != nil && !errors.Is(err, kit.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return "ws://" + ln.Addr().String() + "/", stop
}

// TestKitPersistentSessionAcrossARestart: the box restarts under a
// client (a redeploy); the client resumes its session on the new kit by
// itself, the prompt the restart cut fails saying so, and the session's
// files are there for the next prompt.
func TestKitPersistentSessionAcrossARestart(t *testing.T) {
	p := newProxy(t)
	root := t.TempDir()
	first, stop := servePersistent(t, root, "http://"+p.ln.Addr().String())
	p.setTarget(first)
	b := kitBox(t, p.url(), client.WithReconnect(50, 20*time.Millisecond), client.WithLogger(testkit.Logger(t, slog.LevelInfo)))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "echo kept > note.txt", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	session := b.SessionID()
	cut, err := b.Prompt(ctx, "echo started; sleep 60", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e := range cut.Events(ctx) {
		if strings.Contains(string(e.Data), "started") {
			break
		}
	}
	// A prompt whose frame leaves the client but never reaches the box
	// before it stops: the new kit replays nothing (it restarted), so the
	// client sends it again at once.
	swallowed := p.swallowUpstream()
	late, err := b.Prompt(ctx, "echo late", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, swallowed, "the prompt frame to reach the proxy")
	p.cut()
	stop() // the old kit stops (a redeploy)
	second, _ := servePersistent(t, root, "http://"+p.ln.Addr().String())
	p.setTarget(second)
	// The old kit aborts the running prompt as it stops (AbortError, when
	// the client hears it) or the new one says the restart cut it.
	if _, err := cut.Wait(ctx); err == nil {
		t.Fatal("the prompt the restart cut succeeded")
	}
	if done, err := late.Wait(ctx); err != nil || done.Message != "late\n" {
		t.Fatalf("the prompt the old kit never got: %+v, %v; want it run by the new one", done, err)
	}
	r, err = b.Prompt(ctx, "cat note.txt", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.Wait(ctx)
	if err != nil || done.Message != "kept\n" {
		t.Fatalf("after the restart: %+v, %v; want the session's file", done, err)
	}
	if b.SessionID() != session {
		t.Errorf("session %s after the restart, want %s resumed", b.SessionID(), session)
	}
}

// TestKitPersistentSessionAfterAKill: the box dies without stopping (as
// a kill -9 leaves it: the old kit is simply abandoned here) while a
// prompt's frame is on its way; the new kit numbers its frames past
// anything the old one may have sent and replays nothing, and the
// client sends the lost prompt again at once.
func TestKitPersistentSessionAfterAKill(t *testing.T) {
	p := newProxy(t)
	root := t.TempDir()
	first, _ := servePersistent(t, root, "http://"+p.ln.Addr().String())
	p.setTarget(first)
	b := kitBox(t, p.url(), client.WithReconnect(50, 20*time.Millisecond))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "echo one", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	swallowed := p.swallowUpstream()
	late, err := b.Prompt(ctx, "echo late", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, swallowed, "the prompt frame to reach the proxy")
	second, _ := servePersistent(t, root, "http://"+p.ln.Addr().String())
	p.setTarget(second)
	p.cut()
	if done, err := late.Wait(ctx); err != nil || done.Message != "late\n" {
		t.Fatalf("the prompt the dead kit never got: %+v, %v; want it run by the new one", done, err)
	}
}
