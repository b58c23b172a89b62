// Package sessionbench takes the two timings that kit/internal/kitbench
// and the platform tests' benchmark both report, so that their figures
// measure the same thing: the fork/exec floor (/bin/sh -c 'echo hi' to
// its first byte of output) and a new session to the first event of the
// prompt echo hi.
package sessionbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// Floor times one fork/exec of /bin/sh -c 'echo hi' to its first byte of
// output: the floor under any new session's first event.
func Floor() (time.Duration, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", "echo hi")
	cmd.Stdout = w
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		w.Close()
		return 0, err
	}
	w.Close()
	buf := make([]byte, 8)
	_, err = r.Read(buf)
	d := time.Since(t0)
	cmd.Wait()
	if err != nil {
		return 0, err
	}
	return d, nil
}

// FirstEvent dials a new session at url (ws://host:port/) with key,
// prompts echo hi and returns the time to the prompt's first event; it
// then waits for the prompt to end. It gives up after 30 seconds.
func FirstEvent(ctx context.Context, url, key string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t0 := time.Now()
	c, _, err := wsconn.Dial(ctx, url, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.ReadMessage(); err != nil { // hello
		return 0, err
	}
	if err := c.WriteText([]byte(`{"type":"prompt","id":"p","text":"echo hi","inputs":{}}`)); err != nil {
		return 0, err
	}
	var d time.Duration
	for {
		b, err := c.ReadMessage()
		if err != nil {
			return 0, err
		}
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if m.Type == "event" && d == 0 {
			d = time.Since(t0)
		}
		switch m.Type {
		case "complete":
			return d, nil
		case "error":
			return 0, fmt.Errorf("prompt failed: %s", b)
		}
	}
}
