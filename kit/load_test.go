//go:build load

// The load tests: real sessions over real sockets in numbers, with the
// cores kept busy by other processes. CI runs them (.ci/run) without
// -race, bounded in size.
package kit

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	execagent "github.com/glovebox-dev/glovebox/kit/agent/exec"
)

// leakSessions is how many sessions TestSessionsLeaveNothing opens,
// leakParallel of them at a time.
const (
	leakSessions = 1000
	leakParallel = 50
)

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
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + b.key}}})
		cancel()
		if err != nil {
			t.Fatalf("session %d: dial: %v", i, err)
		}
		c.SetReadDeadline(time.Now().Add(testkit.Timeout))
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
		peak = max(peak, b.srv.budget.replayBytes.Load())
		if got := b.srv.budget.replayBytes.Load(); got > replayTotal {
			t.Fatalf("after %d dropped sessions the replay buffers hold %d bytes, over the cap %d", i+1, got, replayTotal)
		}
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("%d dropped resumable sessions, each %d bytes of output: replay buffers peak %d MiB (cap %d MiB), heap in use %d MiB", sessions, size, peak>>20, replayTotal>>20, ms.HeapInuse>>20)
}
