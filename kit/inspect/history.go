package inspect

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The inspector's history: ended sessions and their prompts, so that the
// page can still answer "what did the agent do an hour ago". The latest
// historySessions sessions (at most historyBytes of JSON) are kept in
// memory and, when the state dir is writable, appended to
// <state>/inspect/history.jsonl, which is rewritten from the ring once it
// grows past twice the bound and reread when the kit starts again. A box
// whose state dir is not writable keeps the ring only.
const (
	historySessions   = 256
	historyBytes      = 4 << 20
	historyPromptText = 1024 // bytes of a prompt's text a record keeps
	historyLineMax    = 1 << 20
)

// SessionRecord is one ended session as GET /inspect/api/history shows it.
type SessionRecord struct {
	ID      string       `json:"id"`
	Owner   string       `json:"owner"`
	Started time.Time    `json:"started"`
	Ended   time.Time    `json:"ended"`
	Cause   string       `json:"cause"`
	Frames  int64        `json:"frames"`
	Bytes   int64        `json:"bytes"`
	Prompts []PromptInfo `json:"prompts"`
	// Peaks sum up its resource samples; zero when it ran
	// no process in a cgroup.
	Peaks ResourcePeaks `json:"peaks,omitzero"`
}

// PromptInfo is what the inspector shows of one prompt.
type PromptInfo struct {
	ID     string   `json:"id"`
	Text   string   `json:"text"`
	Inputs []string `json:"inputs,omitempty"`
	// State is queued, running, complete, error, or ended: the session
	// ended before the prompt reported an outcome.
	State   string    `json:"state"`
	Code    string    `json:"code,omitempty"`
	Queued  time.Time `json:"queued"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Exit, Signal and Limit are from the prompt's exit event, when its
	// agent sends one (a command's exit status, the signal that ended
	// it, the sandbox limit that stopped it); Limit is "timeout" when
	// limits.timeout ran out.
	Exit   *int   `json:"exit,omitempty"`
	Signal string `json:"signal,omitempty"`
	Limit  string `json:"limit,omitempty"`
	// Outputs are the prompt's outputs, as its complete frame named them.
	Outputs map[string]OutputSummary `json:"outputs,omitempty"`
}

// OutputSummary is what the inspector keeps of one output: where it is,
// not its bytes.
type OutputSummary struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
	Size int64  `json:"size,omitempty"`
	Mime string `json:"mime,omitempty"`
}

// ResourceSample is one reading of a session's cgroup.
type ResourceSample struct {
	T      time.Time `json:"t"`
	Memory int64     `json:"mem"`             // bytes
	CPU    float64   `json:"cpu"`             // cores used since the sample before (-1: not counted)
	Procs  int       `json:"procs"`           // processes and threads
	CPUSum float64   `json:"cpu_s,omitempty"` // seconds of CPU used in all
}

// ResourcePeaks sums up a session's samples for its history record.
type ResourcePeaks struct {
	Memory int64   `json:"mem"`
	Procs  int     `json:"procs"`
	CPU    float64 `json:"cpu_s"` // seconds of CPU used, as last sampled
}

// history is a bounded ring of session records, optionally on disk.
type history struct {
	max, maxBytes int
	path          string // "" keeps the ring only
	log           *slog.Logger

	mu    sync.Mutex
	ring  []historyEntry
	bytes int
	size  int64 // bytes of the file
}

type historyEntry struct {
	rec  SessionRecord
	line []byte // its JSON line, newline included
}

// openHistory opens the history kept under dir ("" for memory only),
// rereading what an earlier run left there. A file it cannot read or
// write leaves the history in memory, with the error to log.
func openHistory(dir string, log *slog.Logger) (*history, error) {
	h := &history{max: historySessions, maxBytes: historyBytes, log: log}
	if dir == "" {
		return h, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return h, fmt.Errorf("inspector history: %w", err)
	}
	path := filepath.Join(dir, "history.jsonl")
	if err := h.reread(path); err != nil {
		return h, err
	}
	// The file is rewritten from what was reread: a line cut short when
	// the box stopped goes, and the next record starts a line of its own.
	h.path = path
	if err := h.compact(); err != nil {
		h.path = ""
		return h, err
	}
	return h, nil
}

// reread fills the ring from a history file; lines that are not a record
// are skipped.
func (h *history) reread(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspector history: reread %s: %w", path, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 1 && len(line) <= historyLineMax && line[len(line)-1] == '\n' {
			var rec SessionRecord
			if json.Unmarshal(line, &rec) == nil && rec.ID != "" {
				h.push(rec, line)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inspector history: reread %s: %w", path, err)
		}
	}
}

// push puts a record in the ring, dropping the oldest over the bounds.
// Called with mu held (or before the history is shared).
func (h *history) push(rec SessionRecord, line []byte) {
	h.ring = append(h.ring, historyEntry{rec: rec, line: line})
	h.bytes += len(line)
	drop := 0
	for drop < len(h.ring)-1 && (len(h.ring)-drop > h.max || h.bytes > h.maxBytes) {
		h.bytes -= len(h.ring[drop].line)
		drop++
	}
	if drop > 0 {
		n := len(h.ring)
		h.ring = append(h.ring[:0], h.ring[drop:]...)
		clear(h.ring[len(h.ring):n])
	}
}

// add records an ended session, on disk too when the history has a file.
func (h *history) add(rec SessionRecord) {
	for i := range rec.Prompts {
		if t := rec.Prompts[i].Text; len(t) > historyPromptText {
			rec.Prompts[i].Text = t[:historyPromptText]
		}
	}
	line, err := json.Marshal(rec)
	if err != nil || len(line) >= historyLineMax {
		return
	}
	line = append(line, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	h.push(rec, line)
	if h.path == "" {
		return
	}
	if h.size+int64(len(line)) > 2*int64(h.maxBytes) {
		err = h.compact() // the ring, this record included
	} else {
		err = h.append(line)
	}
	if err != nil {
		h.log.Warn("inspector history: kept in memory only from now", "err", err)
		h.path = ""
	}
}

// append adds a line to the file. Called with mu held.
func (h *history) append(line []byte) error {
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("inspector history: open %s: %w", h.path, err)
	}
	n, err := f.Write(line)
	h.size += int64(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("inspector history: append to %s: %w", h.path, err)
	}
	return nil
}

// compact rewrites the file from the ring. Called with mu held.
func (h *history) compact() error {
	tmp := h.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("inspector history: compact: %w", err)
	}
	var size int64
	bw := bufio.NewWriter(f)
	for _, e := range h.ring {
		n, _ := bw.Write(e.line)
		size += int64(n)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("inspector history: compact %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("inspector history: compact %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("inspector history: compact: %w", err)
	}
	h.size = size
	return nil
}

// list returns the records kept, newest first.
func (h *history) list() []SessionRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]SessionRecord, len(h.ring))
	for i, e := range h.ring {
		out[len(h.ring)-1-i] = e.rec
	}
	return out
}
