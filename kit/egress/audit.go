package egress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The audit trail. A Journal keeps every decision the proxy records as
// one JSON line (an Event with its Seq, resolved addresses and the
// glovebox.toml line of its rule): the latest ones in a ring bounded in
// lines and bytes, and, when it has a directory, appended to audit.jsonl
// there, rotated by size to audit.jsonl.1 ... audit.jsonl.N so that the
// files stay bounded too. A journal opened on a directory that holds a
// trail rereads it: the ring and the numbering go on across restarts.
// Followers get each new line as it is recorded; a follower too slow to
// keep up loses lines and is told how many.

// JournalOptions configure a Journal. Zero values mean the defaults.
type JournalOptions struct {
	// Dir holds the files; "" keeps the ring only.
	Dir string
	// RingLines and RingBytes bound the ring (default 10000 lines, 8 MiB).
	RingLines int
	RingBytes int
	// FileBytes is the size a file is rotated at (default 8 MiB); Keep
	// is how many rotated files are kept (default 3).
	FileBytes int64
	Keep      int
	// MaxFollowers caps the followers at once (default 32).
	MaxFollowers int
	// Logger receives the journal's own problems (a failed write).
	Logger *slog.Logger
}

// JournalFile is the name of the trail's current file in its directory.
const JournalFile = "audit.jsonl"

// followerQueue is how many lines wait for a follower before it loses
// some.
const followerQueue = 512

// ErrTooManyFollowers is Since's error when MaxFollowers follow already.
var ErrTooManyFollowers = errors.New("egress log: too many readers follow it already; try again later")

// Journal is the box's egress audit trail. Its methods are safe for
// concurrent use.
type Journal struct {
	opts JournalOptions
	log  *slog.Logger

	mu        sync.Mutex
	ring      []journalLine
	start     int // ring[start:] is the live part
	ringBytes int
	seq       uint64
	f         *os.File
	size      int64
	followers map[*Follower]struct{}

	records, writeErrs atomic.Int64
	asks               sync.Map // answer -> *atomic.Int64
}

type journalLine struct {
	seq     uint64
	time    time.Time
	session string
	line    []byte // with its newline
}

// OpenJournal makes a journal, rereading the trail in opts.Dir when there
// is one. A directory it cannot write is an error: the caller decides
// whether to go on with the ring only.
func OpenJournal(opts JournalOptions) (*Journal, error) {
	if opts.RingLines <= 0 {
		opts.RingLines = 10000
	}
	if opts.RingBytes <= 0 {
		opts.RingBytes = 8 << 20
	}
	if opts.FileBytes <= 0 {
		opts.FileBytes = 8 << 20
	}
	if opts.Keep <= 0 {
		opts.Keep = 3
	}
	if opts.MaxFollowers <= 0 {
		opts.MaxFollowers = 32
	}
	j := &Journal{opts: opts, log: opts.Logger, followers: map[*Follower]struct{}{}}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	if opts.Dir == "" {
		return j, nil
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress log: make %s: %w", opts.Dir, err)
	}
	// The trail says where agents went: not theirs to read.
	if err := os.Chmod(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress log: %w", err)
	}
	for i := opts.Keep; i >= 0; i-- {
		if err := j.reread(j.fileName(i)); err != nil {
			return nil, err
		}
	}
	if err := j.openFile(); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *Journal) fileName(i int) string {
	name := filepath.Join(j.opts.Dir, JournalFile)
	if i > 0 {
		name += "." + strconv.Itoa(i)
	}
	return name
}

// reread puts the lines of one file of the trail into the ring. Lines
// that are not an event (a line cut short when the box stopped) are
// skipped.
func (j *Journal) reread(name string) error {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("egress log: reread %s: %w", name, err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var ev struct {
				Seq     uint64    `json:"seq"`
				Time    time.Time `json:"time"`
				Session string    `json:"session"`
			}
			if json.Unmarshal(line, &ev) == nil && ev.Seq > j.seq {
				j.seq = ev.Seq
				j.push(journalLine{seq: ev.Seq, time: ev.Time, session: ev.Session, line: line})
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("egress log: reread %s: %w", name, err)
		}
	}
}

// openFile opens the current file for appending, ending a line cut
// short first.
func (j *Journal) openFile() error {
	name := j.fileName(0)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("egress log: open %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("egress log: %w", err)
	}
	j.f, j.size = f, st.Size()
	if j.size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], j.size-1); err == nil && last[0] != '\n' {
			n, _ := f.Write([]byte{'\n'})
			j.size += int64(n)
		}
	}
	return nil
}

// rotate moves the files one up, dropping the oldest, and opens a new
// current file. Called with mu held.
func (j *Journal) rotate() error {
	j.f.Close()
	j.f = nil
	os.Remove(j.fileName(j.opts.Keep))
	for i := j.opts.Keep - 1; i >= 0; i-- {
		if err := os.Rename(j.fileName(i), j.fileName(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("egress log: rotate: %w", err)
		}
	}
	return j.openFile()
}

// push appends a line to the ring and drops the oldest over the bounds.
// Called with mu held (or before the journal is shared).
func (j *Journal) push(l journalLine) {
	j.ring = append(j.ring, l)
	j.ringBytes += len(l.line)
	for len(j.ring)-j.start > j.opts.RingLines || (j.ringBytes > j.opts.RingBytes && len(j.ring)-j.start > 1) {
		j.ringBytes -= len(j.ring[j.start].line)
		j.ring[j.start] = journalLine{}
		j.start++
	}
	if j.start > 1024 && j.start*2 > len(j.ring) {
		j.ring = append(j.ring[:0:0], j.ring[j.start:]...)
		j.start = 0
	}
}

// Record numbers ev, keeps it, writes it to the file when there is one,
// and hands it to the followers whose query it matches.
func (j *Journal) Record(ev *Event) {
	if ev.Ask != "" {
		c, _ := j.asks.LoadOrStore(ev.Ask, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	ev.Seq = j.seq
	line, err := json.Marshal(ev)
	if err != nil {
		// An Event is plain data: this does not happen.
		j.log.Error("egress log: encode a decision", "err", err)
		return
	}
	line = append(line, '\n')
	j.records.Add(1)
	j.push(journalLine{seq: ev.Seq, time: ev.Time, session: ev.Session, line: line})
	if j.f != nil || j.opts.Dir != "" {
		j.write(line)
	}
	for f := range j.followers {
		if !f.q.matches(ev.Seq, ev.Time, ev.Session) {
			continue
		}
		select {
		case f.ch <- line:
		default:
			f.dropped.Add(1)
		}
	}
}

// write appends a line to the file, rotating first when it would grow
// past FileBytes. Called with mu held.
func (j *Journal) write(line []byte) {
	if j.f != nil && j.size > 0 && j.size+int64(len(line)) > j.opts.FileBytes {
		if err := j.rotate(); err != nil {
			j.writeErrs.Add(1)
			j.log.Error("egress log: the trail's file", "err", err)
		}
	}
	if j.f == nil {
		if err := j.openFile(); err != nil {
			j.writeErrs.Add(1)
			j.log.Error("egress log: the trail's file", "err", err)
			return
		}
	}
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		j.writeErrs.Add(1)
		j.log.Error("egress log: write the trail's file", "err", err)
	}
}

// Close closes the file; followers end when their readers leave.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	j.opts.Dir = "" // the ring only from now on
	return err
}

// JournalStats count what a journal recorded.
type JournalStats struct {
	Records     int64
	WriteErrors int64
	// Asks counts the answers to asks, by answer (EgressAsk*).
	Asks map[string]int64
}

// Stats returns the journal's counters.
func (j *Journal) Stats() JournalStats {
	st := JournalStats{Records: j.records.Load(), WriteErrors: j.writeErrs.Load(), Asks: map[string]int64{}}
	j.asks.Range(func(k, v any) bool {
		st.Asks[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return st
}

// Query selects lines of the trail: those after a seq or at or after a
// time, of one session.
type Query struct {
	// AfterSeq keeps lines numbered above it.
	AfterSeq uint64
	// Since keeps lines recorded at or after it.
	Since time.Time
	// Session keeps one session's lines ("" every session's).
	Session string
	// Follow keeps the answer open for new lines.
	Follow bool
}

func (q Query) matches(seq uint64, t time.Time, session string) bool {
	return seq > q.AfterSeq && (q.Since.IsZero() || !t.Before(q.Since)) && (q.Session == "" || q.Session == session)
}

// ParseQuery reads GET /egress/log's query: since (a seq, to get the lines
// after it; an RFC 3339 time; or a duration back from now), session and
// follow (1 or 0). Anything else is an error that says what was wrong.
func ParseQuery(v url.Values, now time.Time) (Query, error) {
	var q Query
	for k, vs := range v {
		switch k {
		case "since", "session", "follow":
			if len(vs) > 1 {
				return q, fmt.Errorf("%s is given %d times: give it once", k, len(vs))
			}
		default:
			return q, fmt.Errorf("unknown parameter %.40q: the egress log takes since, session and follow", k)
		}
	}
	if s := strings.TrimSpace(v.Get("since")); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			q.AfterSeq = n
		} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			q.Since = t
		} else if d, err := time.ParseDuration(s); err == nil && d >= 0 {
			q.Since = now.Add(-d)
		} else {
			return q, fmt.Errorf("since %.60q is neither a seq (the last one read, 42), an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration back from now (10m)", s)
		}
	}
	if s := v.Get("session"); s != "" {
		if len(s) > 128 || strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return q, fmt.Errorf("session %.60q is not a session id", s)
		}
		q.Session = s
	}
	switch v.Get("follow") {
	case "", "0", "false":
	case "1", "true":
		q.Follow = true
	default:
		return q, fmt.Errorf("follow must be 1 or 0, not %.20q", v.Get("follow"))
	}
	return q, nil
}

// Follower receives new lines of the trail.
type Follower struct {
	j       *Journal
	q       Query
	ch      chan []byte
	dropped atomic.Int64
}

// Lines delivers the new lines that match the follower's query.
func (f *Follower) Lines() <-chan []byte { return f.ch }

// TakeDropped returns how many lines the follower lost since the last
// call.
func (f *Follower) TakeDropped() int64 { return f.dropped.Swap(0) }

// Stop ends the follower.
func (f *Follower) Stop() {
	f.j.mu.Lock()
	delete(f.j.followers, f)
	f.j.mu.Unlock()
}

// Since returns the kept lines q selects, oldest first, and, with
// q.Follow, a Follower for the ones recorded after them (Stop it).
func (j *Journal) Since(q Query) ([][]byte, *Follower, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var f *Follower
	if q.Follow {
		if len(j.followers) >= j.opts.MaxFollowers {
			return nil, nil, ErrTooManyFollowers
		}
		f = &Follower{j: j, q: q, ch: make(chan []byte, followerQueue)}
		j.followers[f] = struct{}{}
	}
	var out [][]byte
	for _, l := range j.ring[j.start:] {
		if q.matches(l.seq, l.time, l.session) {
			out = append(out, l.line)
		}
	}
	return out, f, nil
}

// Seq returns the number of the latest line.
func (j *Journal) Seq() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seq
}

// event starts the Event of a decision: its addresses, and the
// glovebox.toml line of its rule.
func event(proto, host string, port int, d Decision) Event {
	ev := Event{Proto: proto, Host: host, Port: port, Decision: d.Verdict, Rule: d.Rule, Reason: d.Reason,
		Line: TOMLLine(d.Verdict, d.Rule), Ask: d.Asked}
	if len(d.Addrs) > 0 {
		ev.Addrs = make([]string, len(d.Addrs))
		for i, a := range d.Addrs {
			ev.Addrs[i] = a.String()
		}
	}
	return ev
}

// TOMLLine is the glovebox.toml [network] line a decision's rule is
// written as, the way a block's 451 answer names it: allow =
// ["api.github.com"] for an allow rule (an approval too: the line that
// would allow the connection for good), deny = [...] for a deny rule, the
// default as it is; "" for a built-in rule, an ask's denial or no rule.
func TOMLLine(verdict, rule string) string {
	switch {
	case rule == "" || strings.HasPrefix(rule, "built-in:") || strings.HasPrefix(rule, "ask:"):
		return ""
	case strings.HasPrefix(rule, "default = "):
		return rule
	case verdict == Deny:
		return "deny = [" + strconv.Quote(rule) + "]"
	}
	return "allow = [" + strconv.Quote(rule) + "]"
}
