//go:build load

// The load tests: real sessions over real sockets in numbers, with the
// cores kept busy by other processes. CI runs them (.ci/run) without
// -race, bounded in size.
package kit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/waittest"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	execagent "github.com/glovebox-dev/glovebox/kit/agent/exec"
)

// leakSessions is how many sessions TestSessionsLeaveNothing opens.
const leakSessions = 1000

// Load sizes: loadSessions sessions at once, each sending loadPrompts
// prompts one after the other.
const (
	loadSessions = 32
	loadPrompts  = 10
)

// burnCores keeps every core busy with shell loops until the test ends.
func burnCores(t *testing.T) {
	t.Helper()
	for range runtime.NumCPU() {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a CPU burner: %v", err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
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
				if m["event_type"] == execagent.EventTextDelta {
					d, _ := m["data"].(map[string]any)
					if d["stream"] == execagent.Stdout {
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

// TestLoadEveryByteDelivered runs loadSessions sessions at once, each
// sending loadPrompts echo prompts, while every core is kept busy by
// another process, and checks that every byte of every prompt's output
// arrives, in its events and in its message.
func TestLoadEveryByteDelivered(t *testing.T) {
	burnCores(t)
	b := serveBox(t, execagent.New())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, loadSessions)
	for s := range loadSessions {
		wg.Go(func() {
			err := loadClient(ctx, b, loadPrompts, func(i int) (string, string) {
				return fmt.Sprintf("echo hi %d-%d", s, i), fmt.Sprintf("hi %d-%d\n", s, i)
			})
			if err != nil {
				errs <- fmt.Errorf("session %d: %w", s, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		failed++
		t.Error(err)
	}
	t.Logf("%d sessions x %d prompts with %d cores kept busy: %d sessions failed, %v", loadSessions, loadPrompts, runtime.NumCPU(), failed, time.Since(start).Round(time.Millisecond))
}

// TestLoadReplayCap drops 400 resumable sessions, each of whose frames
// together exceed its share of the replay cap, and checks that their
// buffers together stay under the cap.
func TestLoadReplayCap(t *testing.T) {
	const sessions, size = 400, 800 << 10
	b := serveBox(t, execagent.New())
	url := "ws" + strings.TrimPrefix(b.url, "http") + "/"
	var peak int64
	for i := range sessions {
		ctx, cancel := context.WithTimeout(context.Background(), waittest.Timeout)
		c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + b.key}}})
		cancel()
		if err != nil {
			t.Fatalf("session %d: dial: %v", i, err)
		}
		c.SetReadDeadline(time.Now().Add(waittest.Timeout))
		c.WriteText([]byte(`{"type":"hello","capabilities":["resume"]}`))
		c.WriteText([]byte(fmt.Sprintf(`{"type":"prompt","id":"p","text":"head -c %d /dev/zero | tr '\\0' a","inputs":{}}`, size)))
		for {
			data, err := c.ReadMessage()
			if err != nil {
				t.Fatalf("session %d: %v", i, err)
			}
			if strings.Contains(string(data), `"type":"complete"`) || strings.Contains(string(data), `"type":"error"`) {
				break
			}
		}
		c.Close() // dropped: the session waits for a resume
		peak = max(peak, b.srv.replayBytes.Load())
		if got := b.srv.replayBytes.Load(); got > replayTotal {
			t.Fatalf("after %d dropped sessions the replay buffers hold %d bytes, over the cap %d", i+1, got, replayTotal)
		}
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("%d dropped resumable sessions, each %d bytes of output: replay buffers peak %d MiB (cap %d MiB), heap in use %d MiB", sessions, size, peak>>20, replayTotal>>20, ms.HeapInuse>>20)
}
