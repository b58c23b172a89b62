package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// startKit serves a real kit with ag on a loopback listener, its
// directories under a temporary root. publicURL overrides the base URL of
// server refs (for a box reached through a proxy).
func startKit(t testing.TB, ag agent.Agent, publicURL string) (url string, srv *kit.Server) {
	t.Helper()
	return startKitWith(t, ag, publicURL, nil)
}

// startKitWith is startKit with edit applied to the box's manifest.
func startKitWith(t testing.TB, ag agent.Agent, publicURL string, edit func(*protocol.Manifest)) (url string, srv *kit.Server) {
	t.Helper()
	m, err := protocol.ParseManifest([]byte(`{"name":"testbox","version":"1.2.3"}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(testKey)
	if edit != nil {
		edit(m)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if publicURL == "" {
		publicURL = "http://" + ln.Addr().String()
	}
	srv, err = kit.New(kit.Options{
		Manifest: m, Key: testKey, Root: t.TempDir(), PublicURL: publicURL, Agent: ag,
		Logger: testkit.Logger(t, slog.LevelWarn),
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		srv.Close(context.Background())
		if err := <-done; err != nil && !errors.Is(err, kit.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return "ws://" + ln.Addr().String() + "/", srv
}

func kitBox(t *testing.T, url string, opts ...client.Option) *client.Box {
	t.Helper()
	c, err := client.New(map[string]client.Endpoint{"kit": {URL: url, Key: testKey}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		checkNoGoroutines(t)
	})
	b, err := c.Box("kit")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readOutput(t *testing.T, r *client.Result, name string, opts ...client.ReadOption) []byte {
	t.Helper()
	rc, err := r.Read(t.Context(), name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestKitExecRoundTrip(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the box's answers")
	script := `echo "in: $(cat "$GLOVEBOX_INPUT/in.txt")"
printf small > "$GLOVEBOX_OUTPUT/small.txt"
head -c 2097152 /dev/zero | tr '\0' 'g' > "$GLOVEBOX_OUTPUT/big.txt"
echo oops >&2
exit 3`
	r, err := b.Prompt(ctx, script, client.PromptOptions{Files: map[string]client.File{"in.txt": {Data: []byte("payload")}}})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	var exit *exec.Exit
	var lastSeq uint64
	for e := range r.Events(ctx) {
		if e.Seq <= lastSeq {
			t.Errorf("event seq %d after %d: want increasing sequence numbers from our kit", e.Seq, lastSeq)
		}
		lastSeq = e.Seq
		switch e.Type {
		case exec.EventTextDelta:
			var d exec.TextDelta
			json.Unmarshal(e.Data, &d)
			if d.Stream == exec.Stderr {
				stderr.WriteString(d.Text)
			} else {
				stdout.WriteString(d.Text)
			}
		case exec.EventExit:
			exit = new(exec.Exit)
			json.Unmarshal(e.Data, exit)
		}
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "in: payload\n" || stderr.String() != "oops\n" {
		t.Errorf("stdout, stderr = %q, %q", stdout.String(), stderr.String())
	}
	if exit == nil || exit.Code != 3 {
		t.Errorf("exit event = %+v, want code 3", exit)
	}
	if done.Message != "in: payload\n" {
		t.Errorf("message = %q", done.Message)
	}
	small, big := done.Outputs["small.txt"], done.Outputs["big.txt"]
	if small.Kind != protocol.KindInline || big.Kind != protocol.KindServer || big.Size != 2<<20 {
		t.Fatalf("outputs = %+v, want small.txt inline and big.txt server (2MB)", done.Outputs)
	}
	if got := readOutput(t, r, "small.txt"); string(got) != "small" {
		t.Errorf("small.txt = %q", got)
	}
	got := readOutput(t, r, "big.txt", client.Consume())
	if len(got) != 2<<20 || strings.Trim(string(got), "g") != "" {
		t.Errorf("big.txt: %d bytes, want 2MB of g", len(got))
	}
	if _, err := r.Read(ctx, "big.txt"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Read after consume = %v, want a 404", err)
	}
}

func TestKitDisplayRoundTrip(t *testing.T) {
	ag := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		v, err := turn.Ask(ctx, "confirm", map[string]string{"q": turn.Text()})
		var rej *agent.RejectedError
		if errors.As(err, &rej) {
			return "rejected: " + string(rej.Reason), nil
		}
		if err != nil {
			return "", err
		}
		return "answer: " + string(v), nil
	})
	url, _ := startKit(t, ag, "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the box's answers")
	for _, tc := range []struct {
		q, want string
		resolve bool
	}{
		{"ship it?", `answer: {"ok":true}`, true},
		{"delete all?", `rejected: "no way"`, false},
	} {
		r, err := b.Prompt(ctx, tc.q, client.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for d := range r.Display(ctx) {
			kinds = append(kinds, d.Kind)
			if d.Kind != client.DisplayPush {
				continue
			}
			if d.Slot.Renderer != "confirm" || !strings.Contains(string(d.Slot.Input), tc.q) {
				t.Errorf("slot = %+v", d.Slot)
			}
			if tc.resolve {
				err = r.Resolve(ctx, d.SlotID, map[string]bool{"ok": true})
			} else {
				err = r.Reject(ctx, d.SlotID, "no way")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		done, err := r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if done.Message != tc.want {
			t.Errorf("%s: message = %q, want %q", tc.q, done.Message, tc.want)
		}
		if len(kinds) == 0 || kinds[0] != client.DisplayPush {
			t.Errorf("%s: display = %v, want a push first", tc.q, kinds)
		}
	}
}

func TestKitAbort(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "echo started; sleep 60", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events(ctx) {
		break // the command is running
	}
	if err := r.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = r.Wait(ctx)
	var be *client.Error
	if !errors.As(err, &be) || be.Code != protocol.CodeAborted {
		t.Fatalf("Wait = %v, want code %s", err, protocol.CodeAborted)
	}
	// The session goes on.
	r2, err := b.Prompt(ctx, "echo next", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r2.Wait(ctx); err != nil || done.Message != "next\n" {
		t.Errorf("prompt after abort = %+v, %v", done, err)
	}
}

func TestKitEnvironmentAndHealth(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	env, err := b.Environment(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if env.Name != "testbox" || env.Version != "1.2.3" || !slices.Contains(env.Capabilities, protocol.CapResume) {
		t.Errorf("Environment = %+v, want testbox 1.2.3 with resume", env)
	}
	h, err := b.Health(t.Context())
	if err != nil || !h.OK || h.Name != "testbox" {
		t.Errorf("Health = %+v, %v", h, err)
	}
}
