// Package logs keeps a box's latest log records in a bounded ring and
// serves them at GET /logs.
package logs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Bounds of a Ring.
const (
	ringRecords = 2000
	ringBytes   = 2 << 20
	// followBuffer is how many records wait for one /logs follower;
	// a follower that falls further behind loses records (and is told).
	followBuffer = 512
	// MaxFollowers bounds the /logs followers at once: every record
	// is handed to each under the ring's lock, and each holds a
	// connection, a goroutine and its buffer.
	MaxFollowers = 32
)

// record is one rendered record: a JSON object and a newline.
type record struct {
	t    time.Time
	line []byte
}

// Ring keeps the latest records, rendered as JSON, and hands new ones
// to followers. It is the io.Writer of a slog.JSONHandler, which writes
// each record in one call.
type Ring struct {
	now func() time.Time

	mu    sync.Mutex
	recs  []record // oldest first
	bytes int
	subs  map[*follower]struct{}
}

// follower receives the records logged after it subscribed.
type follower struct {
	ch      chan []byte
	mu      sync.Mutex
	dropped int
}

func NewRing(now func() time.Time) *Ring {
	return &Ring{now: now, subs: map[*follower]struct{}{}}
}

// Write implements io.Writer for the JSON handler.
func (ring *Ring) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	ring.mu.Lock()
	defer ring.mu.Unlock()
	ring.recs = append(ring.recs, record{t: ring.now(), line: line})
	ring.bytes += len(line)
	drop := 0
	for len(ring.recs)-drop > ringRecords || (ring.bytes > ringBytes && len(ring.recs)-drop > 1) {
		ring.bytes -= len(ring.recs[drop].line)
		ring.recs[drop] = record{}
		drop++
	}
	if drop > 0 {
		ring.recs = ring.recs[drop:]
	}
	for f := range ring.subs {
		select {
		case f.ch <- line:
		default:
			f.mu.Lock()
			f.dropped++
			f.mu.Unlock()
		}
	}
	return len(p), nil
}

// since returns the kept records logged at or after t, and, with follow,
// subscribes a follower in the same step so that no record falls between.
func (ring *Ring) since(t time.Time, follow bool) ([][]byte, *follower, error) {
	ring.mu.Lock()
	defer ring.mu.Unlock()
	if follow && len(ring.subs) >= MaxFollowers {
		return nil, nil, errTooManyFollowers
	}
	var out [][]byte
	for _, rec := range ring.recs {
		if !rec.t.Before(t) {
			out = append(out, rec.line)
		}
	}
	var f *follower
	if follow {
		f = &follower{ch: make(chan []byte, followBuffer)}
		ring.subs[f] = struct{}{}
	}
	return out, f, nil
}

var errTooManyFollowers = fmt.Errorf("too many /logs followers: %d already follow this box's logs; stop one, or read without follow=1", MaxFollowers)

func (ring *Ring) unsubscribe(f *follower) {
	ring.mu.Lock()
	delete(ring.subs, f)
	ring.mu.Unlock()
}

// takeDropped returns and resets how many records f lost.
func (f *follower) takeDropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.dropped
	f.dropped = 0
	return n
}

// Tee returns a logger that logs to base and also keeps its records
// in ring: at Info and above, or Debug when base logs Debug.
func Tee(base *slog.Logger, ring *Ring) *slog.Logger {
	lv := slog.LevelInfo
	if base.Enabled(context.Background(), slog.LevelDebug) {
		lv = slog.LevelDebug
	}
	return slog.New(slog.NewMultiHandler(base.Handler(), slog.NewJSONHandler(ring, &slog.HandlerOptions{Level: lv})))
}

// GET /logs streams the kit's recent log records, one slog JSON object a
// line (application/x-ndjson), to the key or a token with the logs or
// admin scope. ?since= keeps the records logged at or after a time
// (RFC 3339) or a duration back from now ("5m"); ?follow=1 keeps the
// response open and sends each new record as it is logged, until the
// client leaves or the box closes. The kit keeps the latest 2000 records
// (at most 2 MiB); a follower that reads too slowly to keep up with 512
// waiting records loses some and gets a line saying how many. At most 32
// follow at once; one more gets 503 with Retry-After.

// Routes mounts GET /logs, for the key or a token auth admits with the
// logs or admin scope; a follower's answer ends when done closes.
func (ring *Ring) Routes(auth route.Auth, done <-chan struct{}) []route.Route {
	return []route.Route{route.Path("/logs", func(w http.ResponseWriter, r *http.Request) { ring.serve(w, r, auth, done) })}
}

func (ring *Ring) serve(w http.ResponseWriter, r *http.Request, auth route.Auth, done <-chan struct{}) {
	if r.Method != http.MethodGet {
		route.MethodNotAllowed(w, "GET")
		return
	}
	if !auth.Admit(w, r, protocol.ScopeLogs, protocol.ScopeAdmin) {
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
	recs, f, err := ring.since(since, follow)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if f != nil {
		defer ring.unsubscribe(f)
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
	route.Lines(w, r, done, recs, lines, dropped)
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
