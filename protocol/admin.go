package protocol

import "time"

// The operator routes. They are HTTP, not part of the WebSocket protocol,
// and need the key or a token of the scope named:
//
//	GET /sessions          SessionList (admin)
//	GET /files             FileList: the files parked on the box (admin, or files without a --file limit)
//	DELETE /files/{id}     204; 404 when there is no such file (same)
//	GET /logs              the kit's log records, one JSON object a line (logs or admin);
//	                       ?since=RFC3339 or a duration back from now (5m), ?follow=1 keeps the
//	                       response open and streams new records as they are logged
//	GET /metrics           Prometheus text exposition format 0.0.4 (metrics)
//
// A log record is slog's JSON form: {"time","level","msg", attributes...}.

// SessionList is the body of GET /sessions: the box's live sessions,
// oldest first.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// Session states in SessionInfo.State.
const (
	SessionIdle     = "idle"     // connected, no prompt running
	SessionRunning  = "running"  // connected, a prompt running
	SessionDetached = "detached" // its socket dropped; it waits for a resume
	// SessionPaused: detached, and its processes frozen (sessions.pause)
	// until a resume or a prompt wakes it.
	SessionPaused = "paused"
)

// SessionInfo describes one live session.
type SessionInfo struct {
	ID string `json:"id"`
	// Owner names the credential that opened it: "key" for the box key,
	// "sub:NAME" for a token with a subject, else "token:" and a hash of
	// the token. Only the same owner may resume the session.
	Owner        string    `json:"owner"`
	Created      time.Time `json:"created"`
	LastActivity time.Time `json:"last_activity"`
	State        string    `json:"state"`
	// Running is the prompt running now, if any.
	Running *RunningPrompt `json:"running,omitempty"`
	// Queued counts the prompts waiting behind the running one.
	Queued int `json:"queued"`
	// Prompts counts the prompts the session has run to their end.
	Prompts int64 `json:"prompts"`
	// Persistent: the session outlives the kit (sessions.persist and its
	// client announced resume). Additive.
	Persistent bool `json:"persistent,omitempty"`
}

// RunningPrompt is a session's running prompt.
type RunningPrompt struct {
	ID      string    `json:"id"`
	Started time.Time `json:"started"`
	// DurationMS is how long it has run, when the list was made.
	DurationMS int64 `json:"duration_ms"`
}

// FileList is the body of GET /files: the files parked in the box's own
// store (the localServer adapter), newest first, expired ones included
// until the sweeper removes them.
type FileList struct {
	Files []FileInfo `json:"files"`
}

// FileInfo describes one parked file; GET /files/{id} reads it.
type FileInfo struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Mime    string    `json:"mime"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Session string    `json:"session,omitempty"`
	Prompt  string    `json:"prompt,omitempty"`
}
