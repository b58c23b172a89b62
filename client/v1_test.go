package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

const testKey = "test-key"

// newV1Box returns a box talking to a fresh v1 server. The client is
// closed, and checked for leaked goroutines, when the test ends.
func newV1Box(t *testing.T, opts ...client.Option) (*client.Box, *v1Server) {
	t.Helper()
	s := newV1Server(t, testKey)
	c, err := client.New(map[string]client.Endpoint{"v1": {URL: s.url(), Key: testKey}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		checkNoGoroutines(t)
	})
	b, err := c.Box("v1")
	if err != nil {
		t.Fatal(err)
	}
	return b, s
}

// checkNoGoroutines fails the test if a goroutine of this package is still
// running. Close waits for every goroutine it started, so there is no
// grace period to wait out, only context.AfterFunc callbacks that may be
// finishing; those are given a moment.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	testkit.NoGoroutines(t, "glovebox/client.(*Box)")
}

func collect(ctx context.Context, r *client.Result) []client.Event {
	var evs []client.Event
	for e := range r.Events(ctx) {
		evs = append(evs, e)
	}
	return evs
}

func TestV1RoundTrip(t *testing.T) {
	b, s := newV1Box(t)
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "echo hello v1 world", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, e := range collect(ctx, r) {
		if e.Type != "text_delta" {
			t.Errorf("event type = %q, want text_delta", e.Type)
		}
		if e.Seq != 0 {
			t.Errorf("event seq = %d from a v1 box, want 0", e.Seq)
		}
		text = append(text, strings.Trim(strings.TrimPrefix(string(e.Data), `{"text":`), `"}`))
	}
	if got, want := strings.Join(text, " "), "hello v1 world"; got != want {
		t.Errorf("events = %q, want %q", got, want)
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if done.Message != "hello v1 world" || len(done.Outputs) != 0 {
		t.Errorf("Wait = %+v, want message %q and no outputs", done, "hello v1 world")
	}
	if frames := s.framesSeen(); len(frames) < 2 || frames[0] != "hello" || frames[1] != "prompt" {
		t.Errorf("client frames = %v, want hello then prompt", frames)
	}
}

func TestV1PromptIDsUnique(t *testing.T) {
	b, _ := newV1Box(t)
	ctx := testkit.Context(t, "the box's answers")
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r, err := b.Prompt(ctx, "echo n"+strings.Repeat("x", i), client.PromptOptions{DiscardEvents: true})
			if err != nil {
				t.Error(err)
				return
			}
			done, err := r.Wait(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if want := "n" + strings.Repeat("x", i); done.Message != want {
				t.Errorf("prompt %s message = %q, want %q", r.ID(), done.Message, want)
			}
			mu.Lock()
			ids[r.ID()] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != 20 {
		t.Errorf("%d distinct prompt ids for 20 prompts", len(ids))
	}
}

func TestV1Error(t *testing.T) {
	b, _ := newV1Box(t)
	r, err := b.Prompt(t.Context(), "fail", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Wait(t.Context())
	var be *client.Error
	if !errors.As(err, &be) || be.Code != "Error" || be.Message != "boom" {
		t.Fatalf("Wait error = %v, want *client.Error{Error, boom}", err)
	}
}

func TestMalformedFrameFailsItsPrompt(t *testing.T) {
	b, _ := newV1Box(t)
	r, err := b.Prompt(t.Context(), "malformed", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = r.Wait(ctx)
	if !errors.Is(err, client.ErrMalformedFrame) {
		t.Fatalf("Wait error = %v, want ErrMalformedFrame (a prompt whose complete frame cannot be decoded must not wait forever)", err)
	}
	// The box stays usable.
	r, err = b.Prompt(t.Context(), "echo still here", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := r.Wait(ctx); err != nil || c.Message != "still here" {
		t.Fatalf("next prompt = %+v, %v", c, err)
	}
}

func TestV1Display(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resolve bool
		want    string
	}{
		{"resolve", true, `{"answer":true}`},
		{"reject", false, `{"rejected":"user cancelled"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newV1Box(t)
			ctx := testkit.Context(t, "the box's answers")
			r, err := b.Prompt(ctx, "confirm", client.PromptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for d := range r.Display(ctx) {
				kinds = append(kinds, d.Kind)
				if d.Kind != client.DisplayPush {
					continue
				}
				if d.Slot.Renderer != "confirm" || string(d.Slot.Input) != `{"q":"ok?"}` {
					t.Errorf("pushed slot = %+v", d.Slot)
				}
				if tc.resolve {
					err = r.Resolve(ctx, d.SlotID, map[string]bool{"answer": true})
				} else {
					err = r.Reject(ctx, d.SlotID, "user cancelled")
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
				t.Errorf("message = %s, want %s", done.Message, tc.want)
			}
			if !slices.Equal(kinds, []string{"push", "clear"}) {
				t.Errorf("display kinds = %v, want [push clear]", kinds)
			}
		})
	}
}

func TestV1Abort(t *testing.T) {
	b, s := newV1Box(t)
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "wait", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events(ctx) {
		break // the prompt is running
	}
	if err := r.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = r.Wait(ctx)
	var be *client.Error
	if !errors.As(err, &be) || be.Code != protocol.CodeAborted {
		t.Fatalf("Wait error = %v, want code %s", err, protocol.CodeAborted)
	}
	if got := s.abortsSeen(); !slices.Equal(got, []string{r.ID()}) {
		t.Errorf("aborts the box saw = %v, want [%s]", got, r.ID())
	}
	if err := r.Abort(ctx); err != nil {
		t.Errorf("Abort after the end = %v, want nil", err)
	}
}

func TestV1ContextCancelAborts(t *testing.T) {
	b, s := newV1Box(t)
	pctx, cancel := context.WithCancel(testkit.Context(t, "the box's answers"))
	r, err := b.Prompt(pctx, "wait", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range r.Events(t.Context()) {
		break
	}
	cancel()
	if _, err := r.Wait(t.Context()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait error = %v, want context.Canceled", err)
	}
	// The abort reaches the box: a later prompt on the same socket runs
	// only after the aborted one ended.
	r2, err := b.Prompt(t.Context(), "echo after", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.abortsSeen(); !slices.Contains(got, r.ID()) {
		t.Errorf("aborts the box saw = %v, want %s among them", got, r.ID())
	}
}

func TestV1Files(t *testing.T) {
	b, _ := newV1Box(t)
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "files", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string, opts ...client.ReadOption) ([]byte, error) {
		rc, err := r.Read(ctx, name, opts...)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	small, err := read("small.txt")
	if err != nil || string(small) != "hi there" {
		t.Errorf("Read(small.txt) = %q, %v, want %q", small, err, "hi there")
	}
	big, err := read("big.bin", client.Consume())
	if err != nil || len(big) != 1<<20 || !strings.HasPrefix(string(big), "0123456789abcdef") {
		t.Errorf("Read(big.bin) = %d bytes, %v, want 1MB", len(big), err)
	}
	if _, err := read("big.bin"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("second Read(big.bin) after consume = %v, want a 404 error", err)
	}
	if _, err := read("nope"); !errors.Is(err, client.ErrNoOutput) {
		t.Errorf("Read(nope) = %v, want ErrNoOutput", err)
	}
}

// TestV1ServerRefOnTheBoxOrigin: a server ref whose URL names another host
// (a box whose GLOVEBOX_PUBLIC_URL is not the name the client dials) is
// fetched by its id from the box itself; one without an id (which no kit
// sends) is refused. The
// other host never sees a request, let alone the key.
func TestV1ServerRefOnTheBoxOrigin(t *testing.T) {
	var leaked sync.Map
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.URL.Path+" "+r.Header.Get("Authorization"), true)
	}))
	defer other.Close()
	b, s := newV1Box(t)
	s.foreign = other.URL
	r, err := b.Prompt(t.Context(), "foreign", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.Read(t.Context(), "x.bin")
	if err != nil {
		t.Fatalf("Read(x.bin) = %v, want it from the box's /files/x", err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(data) != "X" {
		t.Errorf("Read(x.bin) = %q, %v, want %q", data, err, "X")
	}
	noID := protocol.FileRef{Kind: protocol.KindServer, Name: "noid.bin", URL: other.URL + "/files/x"}
	if _, err := b.Open(t.Context(), noID); !errors.Is(err, client.ErrForeignOrigin) {
		t.Errorf("Open(a ref without id on another origin) = %v, want ErrForeignOrigin", err)
	}
	leaked.Range(func(k, _ any) bool {
		t.Errorf("the other origin got a request: %q", k)
		return true
	})
}

func TestV1Inputs(t *testing.T) {
	b, _ := newV1Box(t)
	r, err := b.Prompt(t.Context(), "inputs", client.PromptOptions{
		Files: map[string]client.File{
			"a.txt": {Data: []byte("A")},
			"b.bin": {Reader: strings.NewReader("B"), Mime: "application/x-b"},
		},
		Inputs: map[string]protocol.FileRef{"c.csv": protocol.InlineRef("c.csv", "text/csv", []byte("C"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := "a.txt(inline,text/plain)=QQ== b.bin(inline,application/x-b)=Qg== c.csv(inline,text/csv)=Qw=="
	if done.Message != want {
		t.Errorf("inputs the box saw = %q, want %q", done.Message, want)
	}
}

func TestV1DropFailsInFlight(t *testing.T) {
	b, _ := newV1Box(t)
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "drop", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Wait error = %v, want ErrConnectionLost", err)
	}
	// The event sent before the drop was kept.
	if evs := collect(ctx, r); len(evs) != 1 {
		t.Errorf("events after the drop = %v, want the one sent before it", evs)
	}
	// The box is not dead: the next prompt dials a new socket.
	r2, err := b.Prompt(ctx, "echo again", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r2.Wait(ctx); err != nil || done.Message != "again" {
		t.Fatalf("prompt after the drop = %v, %v", done, err)
	}
}

func TestV1BufferFull(t *testing.T) {
	b, s := newV1Box(t, client.WithEventBuffer(64<<10))
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, "flood 1000", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads the events: the prompt fails instead of stalling.
	if _, err := r.Wait(ctx); !errors.Is(err, client.ErrBufferFull) {
		t.Fatalf("Wait error = %v, want ErrBufferFull", err)
	}
	// DiscardEvents is the way to wait without reading.
	r2, err := b.Prompt(ctx, "flood 1000", client.PromptOptions{DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r2.Wait(ctx); err != nil || done.Message != "flooded" {
		t.Fatalf("Wait with DiscardEvents = %v, %v", done, err)
	}
	if !slices.Contains(s.abortsSeen(), r.ID()) {
		t.Errorf("the overflowing prompt %s was not aborted on the box (aborts: %v)", r.ID(), s.abortsSeen())
	}
}

func TestV1Unauthorized(t *testing.T) {
	t.Parallel()
	s := newV1Server(t, testKey)
	c, err := client.New(map[string]client.Endpoint{"v1": {URL: s.url(), Key: "wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("v1")
	if _, err := b.Prompt(t.Context(), "echo x", client.PromptOptions{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("Prompt with a wrong key = %v, want ErrUnauthorized", err)
	}
	if _, err := b.Environment(t.Context()); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("Environment with a wrong key = %v, want ErrUnauthorized", err)
	}
}

func TestV1EnvironmentCachedAndShared(t *testing.T) {
	b, s := newV1Box(t)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			env, err := b.Environment(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			if env.Name != "v1box" || env.ProtocolVersion != 1 || env.Limits.Timeout != "5m" {
				t.Errorf("Environment = %+v", env)
			}
		})
	}
	wg.Wait()
	if _, err := b.Environment(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := s.envRequests.Load(); n != 1 {
		t.Errorf("%d GET /environment for 17 calls, want 1", n)
	}
	h, err := b.Health(t.Context())
	if err != nil || !h.OK || h.Name != "v1box" {
		t.Errorf("Health = %+v, %v", h, err)
	}
}

func TestEnvironmentKeepsPathPrefix(t *testing.T) {
	t.Parallel()
	s := newV1Server(t, testKey)
	mux := http.NewServeMux()
	mux.Handle("/boxes/a/", http.StripPrefix("/boxes/a", s))
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RequestURI = strings.TrimPrefix(r.RequestURI, "/boxes/a") // v1 matches the raw request URI
		mux.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	c, err := client.New(map[string]client.Endpoint{"a": {URL: "ws" + strings.TrimPrefix(proxy.URL, "http") + "/boxes/a/", Key: testKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("a")
	env, err := b.Environment(t.Context())
	if err != nil {
		t.Fatalf("Environment behind /boxes/a/: %v", err)
	}
	if env.Name != "v1box" {
		t.Errorf("Environment name = %q", env.Name)
	}
}

func TestClosedBoxIsReplaced(t *testing.T) {
	s := newV1Server(t, testKey)
	c, err := client.New(map[string]client.Endpoint{"v1": {URL: s.url(), Key: testKey}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Box("v1")
	r, err := b.Prompt(t.Context(), "wait", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := r.Wait(t.Context()); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	if _, err := b.Prompt(t.Context(), "echo x", client.PromptOptions{}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Prompt on a closed box = %v, want ErrClosed", err)
	}
	b2, err := c.Box("v1")
	if err != nil || b2 == b {
		t.Fatalf("Box after Close = %p, %v, want a new box", b2, err)
	}
	r2, err := b2.Prompt(t.Context(), "echo fresh", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r2.Wait(t.Context()); err != nil || done.Message != "fresh" {
		t.Errorf("prompt on the new box = %v, %v", done, err)
	}
	c.Close()
	checkNoGoroutines(t)
	if _, err := c.Box("v1"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Box on a closed client = %v, want ErrClosed", err)
	}
}

func TestNewRejectsBadEndpoints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ep   client.Endpoint
		want string
	}{
		{"scheme", client.Endpoint{URL: "ftp://h", Key: "k"}, "scheme must be"},
		{"host", client.Endpoint{URL: "ws://", Key: "k"}, "missing host"},
		{"key", client.Endpoint{URL: "ws://h", Key: " "}, "missing key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(map[string]client.Endpoint{"x": tc.ep})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want an error containing %q", tc.ep, err, tc.want)
			}
		})
	}
	c, _ := client.New(nil)
	if _, err := c.Box("nope"); err == nil || !strings.Contains(err.Error(), `unknown box "nope"`) {
		t.Errorf("Box(nope) = %v", err)
	}
}

func TestV1KeepaliveDetectsAHungBox(t *testing.T) {
	b, _ := newV1Box(t, client.WithKeepalive(20*time.Millisecond))
	r, err := b.Prompt(t.Context(), "freeze", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The box neither answers nor closes the socket; without keepalive
	// this would wait forever.
	if _, err := r.Wait(t.Context()); !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Wait = %v, want ErrConnectionLost once pings go unanswered", err)
	}
}

func TestV1ReadURLOutputWithoutKey(t *testing.T) {
	var gotAuth, gotToken string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotToken = r.Header.Get("Authorization"), r.Header.Get("X-Token")
		io.WriteString(w, "from elsewhere")
	}))
	defer other.Close()
	b, s := newV1Box(t)
	s.foreign = other.URL
	r, err := b.Prompt(t.Context(), "urlout", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.Read(t.Context(), "u.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "from elsewhere" || gotAuth != "" || gotToken != "t0k" {
		t.Errorf("url output = %q with Authorization %q and X-Token %q; want the body, no key, the ref's header", data, gotAuth, gotToken)
	}
}
