package kit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Logging. The kit logs through slog: one Info line when a session opens,
// resumes and closes (with its duration, prompts, frames, events and bytes
// sent) and one per prompt (session, prompt id, duration, outcome: complete
// or the error code, the exit status when the agent reported one, outputs
// and their bytes). Prompt text, inputs, outputs' contents, keys and tokens
// are never logged.
//
// glovebox-kit reads GLOVEBOX_LOG (debug, info, warn or error; default
// info) and GLOVEBOX_LOG_FORMAT (text or json; default text) to log to
// stderr. Whatever its own level, every Server also keeps its recent
// records at Info and above (Debug too when its logger is at Debug) in a
// bounded ring that GET /logs serves.

// Log formats GLOVEBOX_LOG_FORMAT accepts.
const (
	LogText = "text"
	LogJSON = "json"
)

// NewLogHandler returns the handler glovebox-kit logs to w with, for the
// values of GLOVEBOX_LOG (level) and GLOVEBOX_LOG_FORMAT (format); empty
// means info and text.
func NewLogHandler(w io.Writer, level, format string) (slog.Handler, error) {
	var lv slog.Level
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "", "info":
		lv = slog.LevelInfo
	case "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, fmt.Errorf("GLOVEBOX_LOG %q is not a log level: use debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", LogText:
		return slog.NewTextHandler(w, o), nil
	case LogJSON:
		return slog.NewJSONHandler(w, o), nil
	}
	return nil, fmt.Errorf("GLOVEBOX_LOG_FORMAT %q is not a log format: use text or json", format)
}

// Bounds of a Server's log ring.
const (
	logRingRecords = 2000
	logRingBytes   = 2 << 20
	// logFollowBuffer is how many records wait for one /logs follower;
	// a follower that falls further behind loses records (and is told).
	logFollowBuffer = 512
	// logMaxFollowers bounds the /logs followers at once: every record
	// is handed to each under the ring's lock, and each holds a
	// connection, a goroutine and its buffer.
	logMaxFollowers = 32
)

// logRecord is one rendered record: a JSON object and a newline.
type logRecord struct {
	t    time.Time
	line []byte
}

// logRing keeps the latest records, rendered as JSON, and hands new ones
// to followers. It is the io.Writer of a slog.JSONHandler, which writes
// each record in one call.
type logRing struct {
	now func() time.Time

	mu    sync.Mutex
	recs  []logRecord // oldest first
	bytes int
	subs  map[*logFollower]struct{}
}

// logFollower receives the records logged after it subscribed.
type logFollower struct {
	ch      chan []byte
	mu      sync.Mutex
	dropped int
}

func newLogRing(now func() time.Time) *logRing {
	return &logRing{now: now, subs: map[*logFollower]struct{}{}}
}

// Write implements io.Writer for the JSON handler.
func (r *logRing) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, logRecord{t: r.now(), line: line})
	r.bytes += len(line)
	drop := 0
	for len(r.recs)-drop > logRingRecords || (r.bytes > logRingBytes && len(r.recs)-drop > 1) {
		r.bytes -= len(r.recs[drop].line)
		r.recs[drop] = logRecord{}
		drop++
	}
	if drop > 0 {
		r.recs = r.recs[drop:]
	}
	for f := range r.subs {
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
func (r *logRing) since(t time.Time, follow bool) ([][]byte, *logFollower, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if follow && len(r.subs) >= logMaxFollowers {
		return nil, nil, errTooManyFollowers
	}
	var out [][]byte
	for _, rec := range r.recs {
		if !rec.t.Before(t) {
			out = append(out, rec.line)
		}
	}
	var f *logFollower
	if follow {
		f = &logFollower{ch: make(chan []byte, logFollowBuffer)}
		r.subs[f] = struct{}{}
	}
	return out, f, nil
}

var errTooManyFollowers = fmt.Errorf("too many /logs followers: %d already follow this box's logs; stop one, or read without follow=1", logMaxFollowers)

func (r *logRing) unsubscribe(f *logFollower) {
	r.mu.Lock()
	delete(r.subs, f)
	r.mu.Unlock()
}

// takeDropped returns and resets how many records f lost.
func (f *logFollower) takeDropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.dropped
	f.dropped = 0
	return n
}

// withRing returns a logger that logs to base and also keeps its records
// in ring: at Info and above, or Debug when base logs Debug.
func withRing(base *slog.Logger, ring *logRing) *slog.Logger {
	lv := slog.LevelInfo
	if base.Enabled(context.Background(), slog.LevelDebug) {
		lv = slog.LevelDebug
	}
	return slog.New(slog.NewMultiHandler(base.Handler(), slog.NewJSONHandler(ring, &slog.HandlerOptions{Level: lv})))
}
