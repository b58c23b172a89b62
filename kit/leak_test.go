package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
)

// usage is what the kit process holds: goroutines, OS threads and open
// file descriptors.
type usage struct{ goroutines, threads, fds int }

func (u usage) String() string {
	return fmt.Sprintf("%d goroutines, %d threads, %d fds", u.goroutines, u.threads, u.fds)
}

func measure(t testing.TB) usage {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	u := usage{goroutines: runtime.NumGoroutine()}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			u.threads, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("list open fds: %v", err)
	}
	u.fds = len(fds)
	return u
}

// leakTolerance is how far above idle each count may settle: the runtime
// keeps a few threads for its own work (GC workers, a template thread),
// and the HTTP client a few pooled connections.
const leakTolerance = 8

// TestSessionsLeaveNothing opens and closes many sessions, each running a
// prompt through the exec agent in its sandbox over a real socket, and
// checks that goroutines, threads and open fds return to their idle level.
func TestSessionsLeaveNothing(t *testing.T) {
	sessions := leakSessions
	// Sessions overlap, each holding a running process for a while: a
	// kit that blocks an OS thread per process would make as many.
	parallel := leakParallel
	b := serveBox(t, exec.New())
	session := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return loadClient(ctx, b, 1, func(int) (string, string) { return "sleep 0.5; echo hi", "hi\n" })
	}
	if err := session(); err != nil { // warm up pools and lazy state
		t.Fatal(err)
	}
	waitFor(t, "the warm-up session to end", func() bool { return b.srv.sessionCount() == 0 })
	idle := measure(t)
	var peak usage
	var mu sync.Mutex
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range sessions {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := session(); err != nil {
				t.Errorf("session %d: %v", i, err)
			}
			u := measure(t)
			mu.Lock()
			peak = usage{max(peak.goroutines, u.goroutines), max(peak.threads, u.threads), max(peak.fds, u.fds)}
			mu.Unlock()
		})
	}
	wg.Wait()
	var now usage
	deadline := time.Now().Add(30 * time.Second)
	for {
		now = measure(t)
		if b.srv.sessionCount() == 0 && now.goroutines <= idle.goroutines+leakTolerance && now.threads <= idle.threads+leakTolerance && now.fds <= idle.fds+leakTolerance {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d sessions closed: %v (%d sessions), idle %v, peak %v: gave up after 30s waiting for the counts to return to idle", sessions, now, b.srv.sessionCount(), idle, peak)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d sessions: idle %v, peak %v, after %v", sessions, idle, peak, now)
}

// loadClient runs prompts on one session and checks every byte of their
// output, returning what went wrong instead of failing the test (it runs
// off the test's goroutine).
func loadClient(ctx context.Context, b *box, n int, text func(i int) (string, string)) error {
	url := "ws" + strings.TrimPrefix(b.url, "http") + "/"
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + b.key}}})
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetReadDeadline(dl)
	}
	for i := range n {
		cmd, want := text(i)
		id := fmt.Sprintf("p%d", i)
		msg, _ := json.Marshal(map[string]any{"type": "prompt", "id": id, "text": cmd, "inputs": map[string]any{}})
		if err := c.WriteText(msg); err != nil {
			return fmt.Errorf("prompt %s: send: %w", id, err)
		}
		var events strings.Builder
		for {
			data, err := c.ReadMessage()
			if err != nil {
				return fmt.Errorf("prompt %s: read: %w (waited for its complete frame)", id, err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return fmt.Errorf("prompt %s: frame %q: %w", id, data, err)
			}
			if m["id"] != id {
				continue
			}
			switch m["type"] {
			case "event":
				if m["event_type"] == exec.EventTextDelta {
					d, _ := m["data"].(map[string]any)
					if d["stream"] == exec.Stdout {
						events.WriteString(fmt.Sprint(d["text"]))
					}
				}
				continue
			case "complete":
				if m["message"] != want || events.String() != want {
					return fmt.Errorf("prompt %s: message %q, events %q, want %q", id, m["message"], events.String(), want)
				}
			default:
				return fmt.Errorf("prompt %s: %v", id, m)
			}
			break
		}
	}
	c.WriteClose(wsconn.CloseNormal, "done", time.Now().Add(time.Second))
	return nil
}
