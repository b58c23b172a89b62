package kit

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// drainMessage tells a client what a draining box expects of it.
const drainMessage = "this box is shutting down: its running prompts finish, new sessions and prompts go to another instance"

// drain is the box's graceful shutdown (Server.Drain): whether it has
// begun, its deadline, and what wakes it when a prompt ends.
type drain struct {
	draining    atomic.Bool
	until       atomic.Int64  // the deadline, Unix ms
	promptEnded chan struct{} // wakes a waiting Drain
	live        *live
	log         *slog.Logger
}

func newDrain(l *live, log *slog.Logger) *drain {
	return &drain{promptEnded: make(chan struct{}, 1), live: l, log: log}
}

// run is Server.Drain, to deadline.
func (d *drain) run(ctx context.Context, deadline time.Time) error {
	d.live.mu.Lock()
	first := !d.draining.Load()
	if first {
		d.until.Store(deadline.UnixMilli())
	}
	d.draining.Store(true)
	var sessions []*session
	if first {
		for _, ss := range d.live.sessions {
			sessions = append(sessions, ss)
		}
	}
	d.live.mu.Unlock()
	if first {
		b, _ := protocol.Encode(&protocol.Draining{Deadline: deadline.UnixMilli(), Message: drainMessage})
		for _, ss := range sessions {
			ss.stream.sendUnnumbered(b)
		}
		d.log.Info("draining: no new sessions or prompts; waiting for running prompts", "sessions", len(sessions), "deadline", deadline.UTC().Format(time.RFC3339))
	}
	for {
		busy := d.busySessions()
		if busy == 0 {
			d.log.Info("drained: no prompt is running")
			return nil
		}
		select {
		case <-ctx.Done():
			d.log.Warn("drain time is up: cutting the prompts still running", "sessions", busy)
			return ctx.Err()
		case <-d.promptEnded:
		}
	}
}

// busySessions counts the sessions with a prompt running or queued.
func (d *drain) busySessions() int {
	n := 0
	for _, ss := range d.live.all() {
		if queued, running := ss.prompts.load(); running != nil || queued > 0 {
			n++
		}
	}
	return n
}

// notePromptEnded wakes a Drain waiting for prompts to end.
func (d *drain) notePromptEnded() {
	select {
	case d.promptEnded <- struct{}{}:
	default:
	}
}

// refuseDraining answers an upgrade that arrives while the box drains.
func refuseDraining(w http.ResponseWriter) {
	body := []byte("glovebox: this box is shutting down and takes no new sessions: connect again (a load balancer sends you to another instance)\n")
	h := w.Header()
	h.Set("Retry-After", "1")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(body)
}

// drainingHealth is /health's body while the box drains.
func drainingHealth(body []byte) []byte {
	var h protocol.Health
	if err := json.Unmarshal(body, &h); err != nil {
		return []byte(`{"ok":false,"draining":true}`)
	}
	h.OK = false
	h.Draining = true
	b, _ := json.Marshal(h)
	return b
}
