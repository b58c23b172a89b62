package kit

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// GET /logs streams the kit's recent log records, one slog JSON object a
// line (application/x-ndjson), to the key or a token with the logs or
// admin scope. ?since= keeps the records logged at or after a time
// (RFC 3339) or a duration back from now ("5m"); ?follow=1 keeps the
// response open and sends each new record as it is logged, until the
// client leaves or the box closes. The kit keeps the latest 2000 records
// (at most 2 MiB); a follower that reads too slowly to keep up with 512
// waiting records loses some and gets a line saying how many. At most 32
// follow at once; one more gets 503 with Retry-After.

func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		route.MethodNotAllowed(w, "GET")
		return
	}
	if !s.auth.Admit(w, r, protocol.ScopeLogs, protocol.ScopeAdmin) {
		return
	}
	q := r.URL.Query()
	since, err := parseSince(q.Get("since"), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	follow := false
	switch q.Get("follow") {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		http.Error(w, "follow must be 1 or 0", http.StatusBadRequest)
		return
	}
	recs, f, err := s.logs.since(since, follow)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if f != nil {
		defer s.logs.unsubscribe(f)
	}
	var lines <-chan []byte
	var dropped func() []byte
	if f != nil {
		lines = f.ch
		dropped = func() []byte {
			if n := f.takeDropped(); n > 0 {
				return fmt.Appendf(nil, `{"time":%q,"level":"WARN","msg":"log records dropped: this reader fell behind","dropped":%d}`+"\n", time.Now().UTC().Format(time.RFC3339Nano), n)
			}
			return nil
		}
	}
	serveLines(w, r, s.ctx.Done(), recs, lines, dropped)
}

// serveLines answers a GET of JSON lines: backlog, then, when lines is
// not nil (a follower), each line as it comes, until the client or the
// kit (done) goes. dropped, asked before each line that follows, returns
// a line that says how many this reader missed, or nil. What waits is
// sent in one go, then flushed.
func serveLines(w http.ResponseWriter, r *http.Request, done <-chan struct{}, backlog [][]byte, lines <-chan []byte, dropped func() []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	for _, line := range backlog {
		if _, err := w.Write(line); err != nil {
			return
		}
	}
	if lines == nil {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case line := <-lines:
			if d := dropped(); d != nil {
				if _, err := w.Write(d); err != nil {
					return
				}
			}
			if _, err := w.Write(line); err != nil {
				return
			}
			for more := true; more; {
				select {
				case line := <-lines:
					if _, err := w.Write(line); err != nil {
						return
					}
				default:
					more = false
				}
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

// parseSince reads ?since=: empty (everything kept), an RFC 3339 time, or
// a duration back from now.
func parseSince(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since %q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration back from now (10m)", v)
}
