package kit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The egress audit trail. Every decision of the egress proxy (time,
// session, host, port, the addresses it resolved, the verdict, the rule
// and its glovebox.toml line, bytes each way once the connection ends,
// brokered secrets, scrubbed answers, the client's answer to an ask) is
// one JSON line, numbered by seq: the latest 10000 (at most 8 MiB) in
// memory, and, when the state dir is writable, appended to
// <state>/egress-audit/audit.jsonl, rotated at 8 MiB and kept three files
// back, which the kit rereads when it starts again. A box whose state dir
// is not writable keeps the ring only.
//
// GET /egress/log (the key, or a token with the audit or admin scope)
// answers the kept lines (application/x-ndjson); ?since= keeps those after
// a seq (the last one read), at or after an RFC 3339 time, or a duration
// back from now; ?session= one session's; ?follow=1 keeps the answer open
// and sends each new line as it is recorded, until the client leaves or
// the box closes. A follower too slow for 512 waiting lines loses some
// and gets a line saying how many; at most 32 follow at once.

// openAudit opens the box's audit trail, on disk (under stateDir unless
// o says where) when it can.
func openAudit(o egress.JournalOptions, stateDir string, log *slog.Logger) *egress.Journal {
	o.Logger = log
	if o.Dir == "" && dirOK(stateDir) {
		o.Dir = filepath.Join(stateDir, "egress-audit")
	}
	j, err := egress.OpenJournal(o)
	if err != nil {
		log.Warn("egress audit trail: kept in memory only", "err", err)
		o.Dir = ""
		j, _ = egress.OpenJournal(o)
	}
	return j
}

func (er *egressRoutes) serveEgressLog(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		route.MethodNotAllowed(w, "GET")
		return
	}
	if !er.auth.Admit(w, r, protocol.ScopeAudit, protocol.ScopeAdmin) {
		return
	}
	if er.e == nil || er.e.audit == nil {
		http.Error(w, "this box has no egress proxy: add a [network] table to glovebox.toml", http.StatusNotFound)
		return
	}
	q, err := egress.ParseQuery(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, "egress log: "+err.Error(), http.StatusBadRequest)
		return
	}
	lines, f, err := er.e.audit.Since(q)
	if errors.Is(err, egress.ErrTooManyFollowers) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if f != nil {
		defer f.Stop()
	}
	var follow <-chan []byte
	var dropped func() []byte
	if f != nil {
		follow = f.Lines()
		dropped = func() []byte {
			if n := f.TakeDropped(); n > 0 {
				return fmt.Appendf(nil, `{"time":%q,"dropped":%d,"reason":"egress log lines dropped: this reader fell behind"}`+"\n", time.Now().UTC().Format(time.RFC3339Nano), n)
			}
			return nil
		}
	}
	route.Lines(w, r, er.done, lines, follow, dropped)
}

// auditStats reads the audit trail's counters for /metrics; zero when e
// is nil (no proxy).
func (e *kitEgress) auditStats() egress.JournalStats {
	if e == nil || e.audit == nil {
		return egress.JournalStats{}
	}
	return e.audit.Stats()
}
