package kit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Persistent sessions (sessions.persist). A session whose client
// announced "resume" is written to the ledger (reclaim.go) as a record:
// its owner, when it started and was last active, how far its frames are
// numbered, the agent's own id of its conversation and the prompt it
// runs. When the kit stops, such a session releases its sandbox but keeps
// its directories and its record; when the kit dies, the next boot finds
// them the same way. At boot, each record within sessions.resume_grace
// of its last activity (and sessions.lifetime of its start) becomes a
// detached session again, with no process running until it is used: a
// resume by its owner (?resume=ID&last_seq=N) takes it over as before,
// with hello.restarted true, since frames the client had not received
// before the restart are gone (the run records have the prompts that
// ended). A prompt that was running when the kit stopped gets an error
// frame saying so. The agent's conversation continues where the agent can
// load it (agent.Resumable, agent.Session.Resume: ACP session/load).
//
// Frames are numbered on from the record: it reserves numbers ahead
// (seqBlock at a time), so that a kit killed between two writes never
// numbers a frame the client has seen already.

// seqBlock is how many frame numbers a record reserves ahead.
const seqBlock = 1024

// sessionRecord is a persistent session's ledger entry.
type sessionRecord struct {
	Owner   string    `json:"owner"`
	Created time.Time `json:"created"`
	Active  time.Time `json:"active"`
	// Seq: frames are numbered up to here at most.
	Seq uint64 `json:"seq"`
	// Agent is the agent's own id of the conversation (agent.Resumable).
	Agent string `json:"agent,omitempty"`
	// Running is the prompt that was running when it was written.
	Running string `json:"running,omitempty"`
}

// persistence is a session's part in it.
type persistence struct {
	mu       sync.Mutex // orders the writes of its record
	on       bool       // persistent: the box persists and the client announced resume
	reserved uint64     // frame numbers the record reserves (under stream.mu)
	agent    string     // the agent's conversation id, once known
	running  string     // the prompt running, if any
	// restored: the session came back from a record at boot; until a
	// client resumes it, the frames before the restart are gone.
	restored    bool
	interrupted string // the prompt the restart cut, told to the client that resumes
	resumeAgent string // agent.Session.Resume for its conversation
}

// recordPath is session id's ledger entry.
func (c *config) recordPath(id string) string { return filepath.Join(c.ledgerDir(), id) }

// persistent reports whether ss is kept across restarts.
func (ss *session) persistent() bool {
	ss.persist.mu.Lock()
	defer ss.persist.mu.Unlock()
	return ss.persist.on
}

// startPersisting makes ss persistent, when the box persists sessions:
// its client has announced resume.
func (ss *session) startPersisting() {
	if !ss.srv.persist {
		return
	}
	ss.persist.mu.Lock()
	ss.persist.on = true
	ss.persist.mu.Unlock()
	ss.stream.mu.Lock()
	ss.stream.reserveLocked()
	ss.stream.mu.Unlock()
}

// reserveLocked reserves frame numbers past st.seq in the record when
// they run out. st.mu is held.
func (st *stream) reserveLocked() {
	if st.seq < st.ss.persist.reserved && st.ss.persist.reserved != 0 {
		return
	}
	st.ss.persist.reserved = st.seq + seqBlock
	st.ss.saveRecord(st.ss.persist.reserved)
}

// notePrompt records the prompt running (id) or none ("").
func (ss *session) notePrompt(id string) {
	if !ss.persistent() {
		return
	}
	ss.persist.mu.Lock()
	ss.persist.running = id
	ss.persist.mu.Unlock()
	ss.stream.mu.Lock()
	seq := ss.persist.reserved
	ss.stream.mu.Unlock()
	ss.saveRecord(seq)
}

// noteAgent keeps the session's conversation where the agent can name it
// (agent.Resumable: its id may come later, with the agent's handshake,
// so it is asked each time), and records it for a persistent session.
func (ss *session) noteAgent(conv agent.Conversation) {
	r, ok := conv.(agent.Resumable)
	if !ok {
		return
	}
	ss.resumable.Store(&r)
	if !ss.persistent() {
		return
	}
	ss.stream.mu.Lock()
	seq := ss.persist.reserved
	ss.stream.mu.Unlock()
	ss.saveRecord(seq)
}

// saveRecord writes the session's record with frames numbered up to
// seq, atomically (a temporary file renamed over it).
func (ss *session) saveRecord(seq uint64) {
	p := &ss.persist
	agentID := ss.agentSession() // before p.mu, which it takes
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	if agentID != "" {
		p.agent = agentID
	}
	rec := sessionRecord{Owner: ss.owner, Created: ss.created.UTC(), Active: time.Now().UTC(), Seq: seq, Agent: p.agent, Running: p.running}
	b, _ := json.Marshal(rec)
	if err := writeAtomic(ss.srv.recordPath(ss.id), b); err != nil {
		ss.logger().Warn("persistent session: cannot write its record; a restart would lose it", "err", err)
	}
}

// writeAtomic writes b to path through a temporary file renamed over it.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// readRecord reads session id's record; ok false for a ledger entry that
// is not one (a session that was not persistent).
func (c *config) readRecord(id string) (sessionRecord, bool) {
	var rec sessionRecord
	b, err := os.ReadFile(c.recordPath(id))
	if err != nil || len(b) == 0 || json.Unmarshal(b, &rec) != nil || rec.Owner == "" {
		return sessionRecord{}, false
	}
	return rec, true
}

// keptAtBoot reports whether rec's session is restored at boot: the box
// persists sessions, and it is within resume_grace of the later of its
// last activity and the last sign of life of the kit that had it (dead:
// every session in the ledger was alive then, connected or waiting for
// its client), and within lifetime of its start.
func (c *config) keptAtBoot(rec sessionRecord, now, dead time.Time) bool {
	if !c.persist {
		return false
	}
	since := rec.Active
	if dead.After(since) {
		since = dead
	}
	if now.Sub(since) > c.resumeGrace {
		return false
	}
	return c.lifetime <= 0 || now.Sub(rec.Created) < c.lifetime
}

// alivePath is the file a kit whose sessions persist touches while it
// serves (heartbeat): at boot its time is when the kit before died.
func (c *config) alivePath() string { return filepath.Join(c.ledgerDir(), ".alive") }

// lastAlive is when the kit before this one last said it was alive.
func (c *config) lastAlive() time.Time {
	st, err := os.Stat(c.alivePath())
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// heartbeat touches alivePath while the kit serves, often enough within
// resume_grace that a kit killed at any moment leaves the time it died.
func (s *Server) heartbeat() {
	defer s.wg.Done()
	every := min(max(s.resumeGrace/4, 100*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.touchAlive()
		select {
		case <-s.ctx.Done():
			s.touchAlive()
			return
		case <-t.C:
		}
	}
}

func (c *config) touchAlive() {
	p := c.alivePath()
	now := time.Now()
	if err := os.Chtimes(p, now, now); err != nil {
		if err := os.MkdirAll(c.ledgerDir(), 0o700); err == nil {
			if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
				f.Close()
			}
		}
	}
}

// restoreSessions makes the sessions the boot's reclaim kept detached
// sessions again.
func (s *Server) restoreSessions() {
	for id, rec := range s.restore {
		ss := s.newSession()
		ss.id = id
		ss.owner = rec.Owner
		ss.created = rec.Created
		ss.lastActive.Store(rec.Active.UnixNano())
		ss.opened.Store(true)
		ss.persist.on = true
		ss.persist.restored = true
		ss.persist.interrupted = rec.Running
		ss.persist.resumeAgent = rec.Agent
		ss.persist.agent = rec.Agent
		st := &ss.stream
		st.mu.Lock()
		st.seq = rec.Seq
		st.lastSeq.Store(rec.Seq)
		st.canResume.Store(true)
		st.mu.Unlock()
		s.mu.Lock()
		s.sessions[id] = ss
		s.mu.Unlock()
		s.limitLifetimeFrom(ss, rec.Created)
		st.mu.Lock()
		st.awaitResumeLocked(s.resumeGrace - time.Since(rec.Active))
		st.mu.Unlock()
		ss.logger().Info("persistent session restored", "owner", ownerKind(rec.Owner), "interrupted", rec.Running != "")
	}
	s.restore = nil
}

// agentSession is the agent's id of the session's conversation, where
// the agent names one: the running conversation's, else the one the
// session was made to continue (a restore, a persistent session).
func (ss *session) agentSession() string {
	if r := ss.resumable.Load(); r != nil {
		if id := (*r).AgentSession(); id != "" {
			return id
		}
	}
	ss.persist.mu.Lock()
	defer ss.persist.mu.Unlock()
	return ss.persist.resumeAgent
}

// resumeAgent is the conversation the session's agent continues when it
// opens (agent.Session.Resume), if any.
func (ss *session) resumeAgent() string {
	ss.persist.mu.Lock()
	defer ss.persist.mu.Unlock()
	return ss.persist.resumeAgent
}

// setResumeAgent makes the session's agent continue conversation id
// (agent.Session.Resume) when it opens.
func (ss *session) setResumeAgent(id string) {
	ss.persist.mu.Lock()
	ss.persist.resumeAgent = id
	ss.persist.mu.Unlock()
}

// restored reports whether ss came back from a record and no client has
// resumed it since.
func (ss *session) restored() bool {
	ss.persist.mu.Lock()
	defer ss.persist.mu.Unlock()
	return ss.persist.restored
}

// afterRestoredResume tells the client that resumed a restored session
// about the prompt the restart cut, once.
func (ss *session) afterRestoredResume() {
	ss.persist.mu.Lock()
	id := ss.persist.interrupted
	ss.persist.interrupted = ""
	ss.persist.restored = false
	ss.persist.mu.Unlock()
	if id != "" {
		ss.stream.sendError(ss.ctx, id, protocol.CodeError, "the box restarted while this prompt ran: it did not finish (what it wrote so far is in the session's directories)")
	}
}
