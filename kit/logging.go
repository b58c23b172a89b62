package kit

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
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
