package kit

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// drainMessage tells a client what a draining box expects of it.
const drainMessage = "this box is shutting down: its running prompts finish, new sessions and prompts go to another instance"

// Drain starts a graceful shutdown and waits for the box to go quiet: the
// box takes no new sessions (an upgrade gets 503 with Retry-After, and
// /health answers 503 with "draining": true, so that load balancers send
// new sessions elsewhere) and no new prompts on the sessions it has (they
// get an error frame with code Draining); every connected client gets a
// draining frame with the deadline; the prompts already running or queued
// go on, and their outputs are stored as usual. Drain returns nil once no
// session runs or queues a prompt, or ctx's error when ctx ends first
// (its deadline is the drain time: the manifest's sessions.drain in Main).
// Close then ends what is left. Calling Drain again waits again.
func (s *Server) Drain(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.man.DrainTime())
	}
	s.mu.Lock()
	first := !s.draining.Load()
	if first {
		s.drainUntil.Store(deadline.UnixMilli())
	}
	s.draining.Store(true)
	var sessions []*session
	if first {
		for _, ss := range s.sessions {
			sessions = append(sessions, ss)
		}
	}
	s.mu.Unlock()
	if first {
		b, _ := protocol.Encode(&protocol.Draining{Deadline: deadline.UnixMilli(), Message: drainMessage})
		for _, ss := range sessions {
			ss.stream.sendUnnumbered(b)
		}
		s.log.Info("draining: no new sessions or prompts; waiting for running prompts", "sessions", len(sessions), "deadline", deadline.UTC().Format(time.RFC3339))
	}
	for {
		busy := s.busySessions()
		if busy == 0 {
			s.log.Info("drained: no prompt is running")
			return nil
		}
		select {
		case <-ctx.Done():
			s.log.Warn("drain time is up: cutting the prompts still running", "sessions", busy)
			return ctx.Err()
		case <-s.promptEnded:
		}
	}
}

// busySessions counts the sessions with a prompt running or queued.
func (s *Server) busySessions() int {
	s.mu.Lock()
	sessions := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	n := 0
	for _, ss := range sessions {
		if queued, running := ss.prompts.load(); running != nil || queued > 0 {
			n++
		}
	}
	return n
}

// notePromptEnded wakes a Drain waiting for prompts to end.
func (s *Server) notePromptEnded() {
	select {
	case s.promptEnded <- struct{}{}:
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
