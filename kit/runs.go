package kit

import (
	"cmp"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Run records. When a prompt ends, the kit signs a record of it
// (protocol.RunRecord: the box, the session and prompt, the digests of
// the prompt, its inputs and outputs, the agent, the prompt's egress
// decisions, the limits it hit, its outcome, exit status and times) with
// protocol.RunSigningKey of the box key, chained to the session's previous
// record. The draft is completed as the prompt ends and signed by a
// goroutine of its own (one for the box, in the order prompts end): the
// prompt's complete or error frame and the session's next prompt never
// wait for it, and GET /runs waits for a record still being signed.
//
// Inputs and outputs are digested as the kit reads them anyway (writing an
// input, storing an output), never read a second time. The egress
// decisions are the audit trail's lines of the session from the prompt's
// start to its end (at most protocol.MaxRunEgress; egress_dropped counts
// the rest). Limits: the one the agent's exit event names (memory, pids,
// disk), "timeout" for a prompt stopped by limits.timeout, and "disk" for
// one the kit's disk watcher stopped.
//
// A session's records are appended to <state>/runs/<session>.jsonl (0600;
// one line each: the signed record and the identity that opened the
// session) and kept in memory, both as long as the box's parked files
// (the longest ttl of its localServer outputs rules, one hour by default)
// after the session's last record; at most runsMaxBytes in memory, the
// oldest records dropped first (runs_store.go rewrites the files to
// match). A restarted kit rereads the files. A box whose state dir is not
// writable keeps them in memory only.
//
// The box's identity in a record: manifest_digest is the SHA-256 of the
// manifest bytes the kit loaded (Options.ManifestDigest; for a manifest
// given parsed, of its JSON encoding), closure_hash is the closure_sha256
// the image build stamped into the manifest's provenance, else
// GLOVEBOX_CLOSURE_HASH (a box built some other way), else empty.

// runsMaxBytes bounds the records kept in memory.
const runsMaxBytes = 16 << 20

// runRecorder keeps the box's run records. Its zero value is ready: it
// sets itself up on first use.
type runRecorder struct {
	once           sync.Once
	key            ed25519.PrivateKey
	manifestDigest string
	closureHash    string
	recordText     bool
	agent          string
	dir            string // "" keeps records in memory only
	ttl            time.Duration
	maxBytes       int // bounds the records in memory; 0: runsMaxBytes (tests set less)

	mu      sync.Mutex
	chains  map[string]*runChain // by session id
	bytes   int
	queue   []*runDraft // ended prompts to sign, in the order they ended
	sealing bool        // a sealLoop goroutine runs
	wake    chan struct{}

	// The session file sealLoop appends to, kept open while records of
	// one session follow each other; only sealLoop uses them.
	open   *os.File
	openID string
}

// runChain is one session's records.
type runChain struct {
	owner   string
	prev    string // the last record's digest
	seq     int64
	last    time.Time
	records []runEntry
	// live ends with the session (nil for a chain reread from disk,
	// whose session died with an earlier kit): until then the chain's
	// head (seq, prev) outlives its records.
	live    <-chan struct{}
	draft   *runDraft   // the running prompt's
	pending []*runDraft // ended, being signed, in order
}

type runEntry struct {
	prompt string
	ended  time.Time
	body   []byte // the signed record's JSON
}

// runDraft gathers a prompt's record while it runs; done is closed once
// the record is kept (or given up).
type runDraft struct {
	chain           *runChain
	session         string
	log             *slog.Logger
	inputs, outputs map[string]protocol.RunFile
	limit           string
	rec             *protocol.RunRecord
	text            string // the prompt's, digested by seal
	started, ended  time.Time
	done            chan struct{}
}

// runsManifest returns the manifest with its runs block naming the
// public key of key, and reports a manifest that names another one.
func runsManifest(b *boot, m *protocol.Manifest, key string) *protocol.Manifest {
	pub := protocol.RunPublicKey(key)
	if m.Runs != nil && m.Runs.PublicKey != "" && m.Runs.PublicKey != pub && key != "" {
		b.add("manifest: runs.public_key does not match GLOVEBOX_KEY's run record key (%s): use the key generated with this manifest, or regenerate it", pub)
	}
	c := *m
	runs := protocol.RunsSpec{}
	if m.Runs != nil {
		runs = *m.Runs
	}
	runs.PublicKey = pub
	c.Runs = &runs
	return &c
}

// init sets the recorder up from the server, once.
func (rr *runRecorder) init(s *Server) {
	rr.once.Do(func() {
		rr.key = protocol.RunSigningKey(s.opts.Key)
		rr.manifestDigest = s.opts.ManifestDigest
		if rr.manifestDigest == "" {
			b, _ := json.Marshal(s.man)
			sum := sha256.Sum256(b)
			rr.manifestDigest = hex.EncodeToString(sum[:])
		}
		rr.closureHash = closureHash(s)
		rr.recordText = s.man.Runs != nil && s.man.Runs.RecordText
		rr.agent = runAgent(s.man.Agent)
		rr.ttl = runsTTL(s.man.StoragePolicy.Outputs)
		rr.chains = map[string]*runChain{}
		rr.wake = make(chan struct{}, 1)
		dir := filepath.Join(s.stateDir, "runs")
		if s.stateDir != "" && os.MkdirAll(dir, 0o700) == nil {
			rr.dir = dir
			rr.reread(s)
		}
	})
}

// closureHash reads the box's closure hash (see above).
func closureHash(s *Server) string {
	if p := s.man.Provenance; p != nil && p.ClosureSHA256 != "" {
		return p.ClosureSHA256
	}
	return strings.TrimSpace(s.getenv("GLOVEBOX_CLOSURE_HASH"))
}

// runAgent names the agent as a record does: its type, and for an exec
// or ACP agent with a command, the command's base name.
func runAgent(a *protocol.AgentSpec) string {
	if a == nil {
		return protocol.AgentExec
	}
	if len(a.Command) > 0 {
		return a.Type + ":" + filepath.Base(a.Command[0])
	}
	return a.Type
}

// runsTTL is how long records live: as long as the longest-lived parked
// output.
func runsTTL(p protocol.Policy) time.Duration {
	ttl := storage.DefaultTTL
	for _, r := range p.Rules {
		if r.Use.Adapter != protocol.AdapterLocalServer {
			continue
		}
		if s, ok := r.Use.Options["ttl"].(string); ok {
			if d, err := protocol.ParseDuration(s); err == nil && d > ttl {
				ttl = d
			}
		}
	}
	return ttl
}

// draftLocked returns the session's draft, made when there is none.
// Called with mu held.
func (rr *runRecorder) draftLocked(ss *session) *runDraft {
	c := rr.chains[ss.id]
	if c == nil {
		c = &runChain{owner: ss.owner, prev: protocol.RunChainStart(ss.id)}
		rr.chains[ss.id] = c
	}
	c.live = ss.ctx.Done()
	if c.draft == nil {
		c.draft = &runDraft{chain: c, session: ss.id, log: ss.logger(), done: make(chan struct{})}
	}
	return c.draft
}

// noteFile keeps the digest of an input ("inputs") or output ("outputs")
// read through h for the session's running prompt. What its reader left
// unread (an adapter that stopped at the size it was told, short of EOF)
// is read first, so that the digest is the whole file's.
func (rr *runRecorder) noteFile(ss *session, kind, name string, h *hashReader) {
	rr.init(ss.srv)
	io.Copy(io.Discard, h)
	f := protocol.RunFile{SHA256: hex.EncodeToString(h.h.Sum(nil)), Size: h.n}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	d := rr.draftLocked(ss)
	m := &d.inputs
	if kind == "outputs" {
		m = &d.outputs
	}
	if *m == nil {
		*m = map[string]protocol.RunFile{}
	}
	(*m)[name] = f
}

// noteLimit keeps the limit the agent's exit event names.
func (rr *runRecorder) noteLimit(ss *session, limit string) {
	if limit == "" {
		return
	}
	rr.init(ss.srv)
	rr.mu.Lock()
	rr.draftLocked(ss).limit = limit
	rr.mu.Unlock()
}

// ended completes the draft of a prompt that just ended (what it knows
// at once: ids, outcome, exit status, times) and queues it for sealLoop,
// which sealQueued starts or wakes. It runs before the prompt's frame goes
// out, so it does nothing costly: the text's digest is seal's.
func (rr *runRecorder) ended(ss *session, p *promptRun, outcome string) {
	srv := ss.srv
	rr.init(srv)
	now := time.Now()
	r := &protocol.RunRecord{
		V: protocol.RunRecordVersion, ClosureHash: rr.closureHash, ManifestDigest: rr.manifestDigest,
		Session: ss.id, Prompt: p.msg.ID, Agent: rr.agent,
		Outcome: outcome, Started: protocol.RunTime(p.started), Ended: protocol.RunTime(now),
		DurationMS: now.Sub(p.started).Milliseconds(),
	}
	if code := ss.exitCode.Load(); code != noExit {
		r.ExitCode = &code
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	d := rr.draftLocked(ss)
	d.rec, d.text, d.started, d.ended = r, p.msg.Text, p.started, now
	d.chain.draft = nil
	d.chain.pending = append(d.chain.pending, d)
	rr.queue = append(rr.queue, d)
}

// sealQueued has the records ended so far signed, starting the signing
// goroutine if none runs. The prompt's runner calls it once the prompt's
// last frame is written: signing takes a core for tens of microseconds,
// which the client reading that frame would otherwise wait for.
func (rr *runRecorder) sealQueued(srv *Server) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if len(rr.queue) == 0 {
		return
	}
	if !rr.sealing {
		rr.sealing = true
		srv.wg.Add(1) // a prompt's runner holds srv.wg: Close has not stopped waiting
		go rr.sealLoop(srv)
		return
	}
	select {
	case rr.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// sealLoop signs the queued records in order. With none left it waits
// for more as long as an idle prompt runner does (runnerLinger), keeping
// the last session's file open, and ends with the box.
func (rr *runRecorder) sealLoop(srv *Server) {
	defer srv.wg.Done()
	idle := time.NewTimer(srv.runnerLinger)
	defer idle.Stop()
	for {
		rr.mu.Lock()
		if len(rr.queue) == 0 {
			rr.mu.Unlock()
			idle.Reset(srv.runnerLinger)
			select {
			case <-rr.wake:
				continue
			case <-srv.ctx.Done():
			case <-idle.C:
			}
			rr.mu.Lock()
			if len(rr.queue) == 0 {
				rr.closeFile() // before another sealLoop may start
				rr.sealing = false
				rr.mu.Unlock()
				return
			}
		}
		d := rr.queue[0]
		rr.queue[0] = nil
		rr.queue = rr.queue[1:]
		rr.mu.Unlock()
		rr.seal(srv, d)
	}
}

// seal signs a drafted record and keeps it. Only sealLoop calls it, so
// a chain's seq and prev change nowhere else. It yields before its two
// costly steps (reading the egress trail, signing): the goroutines of a
// prompt's frames, woken meanwhile, go first.
func (rr *runRecorder) seal(srv *Server, d *runDraft) {
	defer close(d.done)
	runtime.Gosched()
	c, r := d.chain, d.rec
	sum := sha256.Sum256([]byte(d.text))
	r.PromptDigest = hex.EncodeToString(sum[:])
	if rr.recordText {
		r.PromptText = d.text
	}
	r.Inputs, r.Outputs = d.inputs, d.outputs
	r.Limits = runLimits(d.limit, r.Outcome)
	r.Egress, r.EgressDropped = rr.egressWindow(srv, d.session, d.started, d.ended)
	rr.mu.Lock()
	r.Seq, r.Prev = c.seq+1, c.prev
	rr.mu.Unlock()
	runtime.Gosched()
	signed, err := protocol.SignRun(rr.key, r)
	var body []byte
	if err == nil {
		body = signed.Encode()
	}

	rr.mu.Lock()
	defer rr.mu.Unlock()
	c.pending[0] = nil
	c.pending = c.pending[1:]
	if err != nil {
		d.log.Error("run record not signed", "prompt", r.Prompt, "err", err)
		return
	}
	c.seq, c.prev, c.last = r.Seq, signed.Digest, d.ended
	c.records = append(c.records, runEntry{prompt: r.Prompt, ended: d.ended, body: body})
	rr.bytes += len(body)
	if rr.dir != "" {
		if err := rr.append(d.session, c.owner, body); err != nil {
			d.log.Warn("run record kept in memory only", "prompt", r.Prompt, "err", err)
		}
	}
	rr.trimLocked(d.ended)
}

// runLimits lists the limits a prompt hit.
func runLimits(named, outcome string) []string {
	switch {
	case named != "":
		return []string{named}
	case outcome == protocol.CodeTimeout:
		return []string{"timeout"}
	case outcome == protocol.CodeLimit:
		return []string{"disk"} // only the disk watcher fails a prompt with no limit named
	}
	return nil
}

// egressWindow is the session's egress decisions from start to end.
func (rr *runRecorder) egressWindow(srv *Server, session string, start, end time.Time) ([]protocol.RunEgressDecision, int64) {
	e := srv.egress
	if e == nil || e.audit == nil {
		return nil, 0
	}
	lines, _, err := e.audit.Since(egress.Query{Session: session, Since: start})
	if err != nil {
		return nil, 0
	}
	var out []protocol.RunEgressDecision
	var dropped int64
	for _, l := range lines {
		var ev protocol.EgressEvent
		if json.Unmarshal(l, &ev) != nil || ev.Time.After(end) {
			continue
		}
		if len(out) == protocol.MaxRunEgress {
			dropped++
			continue
		}
		out = append(out, protocol.RunEgressDecision{Seq: ev.Seq, Time: protocol.RunTime(ev.Time), Proto: ev.Proto,
			Host: ev.Host, Port: ev.Port, Decision: ev.Decision, Rule: ev.Rule, Line: ev.Line})
	}
	return out, dropped
}

// trimLocked drops the records whose session's last record is older than
// the TTL, forgetting the session unless it is still live (a live one
// keeps its seq and last digest, so that its next record does not start
// a chain that would hide the dropped ones), and, while the records take more than runsMaxBytes, drops the
// oldest records of any session down to three quarters of it (a session
// keeps its seq and last digest: its next record still links to the
// dropped one, and a verifier is told the chain's start is missing).
// Called with mu held.
func (rr *runRecorder) trimLocked(now time.Time) {
	for id, c := range rr.chains {
		if c.draft == nil && len(c.pending) == 0 && now.Sub(c.last) > rr.ttl {
			if len(c.records) > 0 {
				for _, e := range c.records {
					rr.bytes -= len(e.body)
				}
				c.records = nil
				if rr.dir != "" {
					rr.removeFile(id)
				}
			}
			if !isLive(c.live) {
				delete(rr.chains, id)
			}
		}
	}
	max := cmp.Or(rr.maxBytes, runsMaxBytes)
	if rr.bytes <= max {
		return
	}
	touched := map[string]*runChain{}
	for rr.bytes > max*3/4 {
		var oldest string
		for id, c := range rr.chains {
			if len(c.records) > 0 && (oldest == "" || c.records[0].ended.Before(rr.chains[oldest].records[0].ended)) {
				oldest = id
			}
		}
		if oldest == "" {
			break
		}
		c := rr.chains[oldest]
		rr.bytes -= len(c.records[0].body)
		c.records[0] = runEntry{}
		c.records = c.records[1:]
		touched[oldest] = c
	}
	if rr.dir == "" {
		return
	}
	for id, c := range touched {
		if err := rr.rewrite(id, c); err != nil {
			rr.removeFile(id)
		}
	}
}

// hashReader digests what is read through it.
type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func newHashReader(r io.Reader) *hashReader { return &hashReader{r: r, h: sha256.New()} }

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

// isLive reports whether done (a session's Done channel) is still open.
func isLive(done <-chan struct{}) bool {
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}
