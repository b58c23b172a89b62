// Package metrics serves a box's GET /metrics in the Prometheus text
// exposition format (version 0.0.4), to the key or a token with the
// metrics scope: the counters the kit adds to as it serves, and the gauges
// it reads when asked (sessions, parked files, uploads, egress, memory).
// The exposition is written by hand: the kit binary's dependency budget
// (stdlib, websocket, sqlite, x/sync, x/sys) has no room for the
// Prometheus client library, and a few counters need none.
package metrics

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// promptBuckets are the upper bounds, in seconds, of the prompt duration
// histogram.
var promptBuckets = []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800}

// Counters count what a box does as it serves; the kit adds to them.
type Counters struct {
	SessionsTotal atomic.Int64 // sessions opened
	ResumesTotal  atomic.Int64 // sessions resumed
	// SessionsPaused counts pauses of sessions waiting for a resume.
	SessionsPaused atomic.Int64
	FramesSent     atomic.Int64 // numbered frames sent
	EventsSent     atomic.Int64 // event frames sent
	BytesSent      atomic.Int64 // bytes of numbered frames sent
	limitErrors    atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int64 // prompts by outcome: complete or an error code
	buckets  []int64          // prompt durations, per bucket (not cumulative)
	count    int64
	sum      float64
}

// NewCounters returns counters at zero.
func NewCounters() *Counters {
	return &Counters{outcomes: map[string]int64{}, buckets: make([]int64, len(promptBuckets)+1)}
}

// Prompt records a prompt that ended with outcome (complete, or the
// error code sent) after d.
func (o *Counters) Prompt(outcome string, d time.Duration) {
	if outcome == protocol.CodeLimit {
		o.limitErrors.Add(1)
	}
	sec := d.Seconds()
	i, _ := slices.BinarySearch(promptBuckets, sec)
	o.mu.Lock()
	o.outcomes[outcome]++
	o.buckets[i]++
	o.count++
	o.sum += sec
	o.mu.Unlock()
}

// Sources are what /metrics reads of the box when it is asked.
type Sources struct {
	Kit, Box, BoxVersion string // the kit's version, the box's name and version
	Degraded             bool   // the sandbox lacks a protection
	// Sessions counts the open sessions, their queued prompts and their
	// running ones.
	Sessions func() (open, queued, running int)
	// Parked reads the file store's totals.
	Parked func(ctx context.Context) (files, bytes int64)
	// Uploads counts the partial uploads under way and their bytes.
	Uploads func() (n, bytes int64)
	// Egress and Audit read the egress proxy's and its audit trail's
	// counters; zero without a proxy.
	Egress func() egress.Stats
	Audit  func() egress.JournalStats
}

// Metrics serves GET /metrics.
type Metrics struct {
	auth route.Auth
	c    *Counters
	src  Sources
}

// New returns the /metrics route of a box: for the key or a token auth
// admits with the metrics scope, c and what src reads.
func New(auth route.Auth, c *Counters, src Sources) *Metrics {
	return &Metrics{auth: auth, c: c, src: src}
}

// Routes mounts GET /metrics.
func (mt *Metrics) Routes() []route.Route {
	return []route.Route{route.Path("/metrics", mt.serve)}
}

func (mt *Metrics) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !mt.auth.Admit(w, r, protocol.ScopeMetrics) {
		return
	}
	route.Body(w, r, "text/plain; version=0.0.4; charset=utf-8", "no-store", mt.text(r.Context()))
}

// text renders every metric.
func (mt *Metrics) text(ctx context.Context) []byte {
	var b strings.Builder
	m := metricWriter{&b}
	mt.writeSessions(m)
	writePrompts(m, mt.c)
	writeFrames(m, mt.c)
	mt.writeStore(ctx, m)
	writeEgress(m, mt.src.Egress(), mt.src.Audit())
	writeProcess(m)
	return []byte(b.String())
}

// writeSessions writes what the kit and the box are, whether the sandbox
// is degraded, and the sessions and prompts alive now.
func (mt *Metrics) writeSessions(m metricWriter) {
	o, src := mt.c, mt.src
	open, queued, running := src.Sessions()
	m.family("glovebox_build_info", "gauge", "The kit's version and the box's name and version; always 1.")
	m.sample("glovebox_build_info", labels("kit_version", src.Kit, "box", src.Box, "box_version", src.BoxVersion), "1")
	m.family("glovebox_sandbox_degraded", "gauge", "1 when the box serves although its sandbox cannot keep sessions apart or enforce its egress policy (allowed, or the sandbox turned off).")
	m.sample("glovebox_sandbox_degraded", "", map[bool]string{false: "0", true: "1"}[src.Degraded])
	m.family("glovebox_sessions_open", "gauge", "Sessions alive now, connected or waiting for a resume.")
	m.sample("glovebox_sessions_open", "", itoa(int64(open)))
	m.family("glovebox_sessions_total", "counter", "Sessions opened since the kit started.")
	m.sample("glovebox_sessions_total", "", itoa(o.SessionsTotal.Load()))
	m.family("glovebox_session_resumes_total", "counter", "Sessions resumed after a dropped socket.")
	m.sample("glovebox_session_resumes_total", "", itoa(o.ResumesTotal.Load()))
	m.family("glovebox_session_pauses_total", "counter", "Sessions paused (their processes frozen) while waiting for a resume.")
	m.sample("glovebox_session_pauses_total", "", itoa(o.SessionsPaused.Load()))
	m.family("glovebox_prompts_running", "gauge", "Prompts running now.")
	m.sample("glovebox_prompts_running", "", itoa(int64(running)))
	m.family("glovebox_queue_depth", "gauge", "Prompts queued behind a running one, over all sessions.")
	m.sample("glovebox_queue_depth", "", itoa(int64(queued)))
}

// writePrompts writes the prompts that ended by outcome and the histogram
// of their durations, from one snapshot of o.
func writePrompts(m metricWriter, o *Counters) {
	o.mu.Lock()
	outcomes := maps.Clone(o.outcomes)
	buckets := slices.Clone(o.buckets)
	count, sum := o.count, o.sum
	o.mu.Unlock()
	m.family("glovebox_prompts_total", "counter", "Prompts that ended, by outcome: complete, or the error code sent.")
	if len(outcomes) == 0 {
		m.sample("glovebox_prompts_total", labels("outcome", "complete"), "0")
	}
	for _, k := range slices.Sorted(maps.Keys(outcomes)) {
		m.sample("glovebox_prompts_total", labels("outcome", k), itoa(outcomes[k]))
	}
	m.family("glovebox_prompt_duration_seconds", "histogram", "How long prompts ran, from leaving the queue to their complete or error frame.")
	var cum int64
	for i, le := range promptBuckets {
		cum += buckets[i]
		m.sample("glovebox_prompt_duration_seconds_bucket", labels("le", strconv.FormatFloat(le, 'g', -1, 64)), itoa(cum))
	}
	cum += buckets[len(promptBuckets)]
	m.sample("glovebox_prompt_duration_seconds_bucket", labels("le", "+Inf"), itoa(cum))
	m.sample("glovebox_prompt_duration_seconds_sum", "", strconv.FormatFloat(sum, 'g', -1, 64))
	m.sample("glovebox_prompt_duration_seconds_count", "", itoa(count))
}

// writeFrames writes the counters of what was sent to clients and of the
// prompts a sandbox limit ended.
func writeFrames(m metricWriter, o *Counters) {
	m.family("glovebox_frames_sent_total", "counter", "Numbered frames sent to clients (events, display, complete, error).")
	m.sample("glovebox_frames_sent_total", "", itoa(o.FramesSent.Load()))
	m.family("glovebox_events_sent_total", "counter", "Event frames sent to clients.")
	m.sample("glovebox_events_sent_total", "", itoa(o.EventsSent.Load()))
	m.family("glovebox_bytes_sent_total", "counter", "Bytes of numbered frames sent to clients.")
	m.sample("glovebox_bytes_sent_total", "", itoa(o.BytesSent.Load()))
	m.family("glovebox_sandbox_limit_errors_total", "counter", "Prompts ended by a sandbox limit (LimitError: memory, processes, disk).")
	m.sample("glovebox_sandbox_limit_errors_total", "", itoa(o.limitErrors.Load()))
}

// writeStore writes what the box's own store holds: parked files and
// resumable uploads under way.
func (mt *Metrics) writeStore(ctx context.Context, m metricWriter) {
	src := mt.src
	files, fileBytes := src.Parked(ctx)
	m.family("glovebox_parked_files", "gauge", "Files parked in the box's own store (localServer).")
	m.sample("glovebox_parked_files", "", itoa(files))
	m.family("glovebox_parked_bytes", "gauge", "Bytes of the files parked in the box's own store.")
	m.sample("glovebox_parked_bytes", "", itoa(fileBytes))
	ups, upBytes := src.Uploads()
	m.family("glovebox_partial_uploads", "gauge", "Resumable uploads under way (POST /uploads/{name}).")
	m.sample("glovebox_partial_uploads", "", itoa(ups))
	m.family("glovebox_partial_upload_bytes", "gauge", "Bytes the resumable uploads under way hold on disk.")
	m.sample("glovebox_partial_upload_bytes", "", itoa(upBytes))
}

// writeEgress writes the egress proxy's decisions and bytes, and what
// its audit trail asked and recorded (auditMetrics).
func writeEgress(m metricWriter, es egress.Stats, audit egress.JournalStats) {
	m.family("glovebox_egress_decisions_total", "counter", "Connections the egress proxy decided on, by decision.")
	m.sample("glovebox_egress_decisions_total", labels("decision", "allow"), itoa(es.Allowed))
	m.sample("glovebox_egress_decisions_total", labels("decision", "deny"), itoa(es.Denied))
	m.sample("glovebox_egress_decisions_total", labels("decision", "fail"), itoa(es.Failed))
	m.family("glovebox_egress_bytes_total", "counter", "Bytes the egress proxy carried, by direction.")
	m.sample("glovebox_egress_bytes_total", labels("direction", "out"), itoa(es.BytesOut))
	m.sample("glovebox_egress_bytes_total", labels("direction", "in"), itoa(es.BytesIn))
	auditMetrics(m, audit)
}

// writeProcess writes the kit process's memory and goroutines.
func writeProcess(m metricWriter) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.family("process_resident_memory_bytes", "gauge", "Resident memory of the kit's process.")
	m.sample("process_resident_memory_bytes", "", itoa(residentMemory()))
	m.family("go_memstats_heap_alloc_bytes", "gauge", "Bytes of allocated heap objects.")
	m.sample("go_memstats_heap_alloc_bytes", "", strconv.FormatUint(ms.HeapAlloc, 10))
	m.family("go_memstats_sys_bytes", "gauge", "Bytes the Go runtime obtained from the system.")
	m.sample("go_memstats_sys_bytes", "", strconv.FormatUint(ms.Sys, 10))
	m.family("go_goroutines", "gauge", "Goroutines that exist now.")
	m.sample("go_goroutines", "", itoa(int64(runtime.NumGoroutine())))
}

// residentMemory reads the process's resident set size from
// /proc/self/statm; 0 where there is none.
func residentMemory() int64 {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// metricWriter writes the text exposition format.
type metricWriter struct{ b *strings.Builder }

func (m metricWriter) family(name, typ, help string) {
	fmt.Fprintf(m.b, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

func (m metricWriter) sample(name, labels, value string) {
	m.b.WriteString(name)
	m.b.WriteString(labels)
	m.b.WriteByte(' ')
	m.b.WriteString(value)
	m.b.WriteByte('\n')
}

// labels renders {k="v",...} from pairs, with the values escaped.
func labels(kv ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(kv[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// auditMetrics adds the audit trail's counters to /metrics: the asks by
// answer, the lines recorded and the writes that failed.
func auditMetrics(m metricWriter, st egress.JournalStats) {
	m.family("glovebox_egress_asks_total", "counter", "Connections no rule covered that the egress proxy asked the session's client about, by answer (timeout: none in time).")
	for _, a := range append(slices.Clone(protocol.EgressAskChoices), protocol.EgressAskTimeout) {
		m.sample("glovebox_egress_asks_total", labels("answer", a), itoa(st.Asks[a]))
	}
	m.family("glovebox_egress_audit_records_total", "counter", "Egress decisions recorded in the audit trail.")
	m.sample("glovebox_egress_audit_records_total", "", itoa(st.Records))
	m.family("glovebox_egress_audit_write_errors_total", "counter", "Audit trail lines the kit could not write to its file (kept in memory only).")
	m.sample("glovebox_egress_audit_write_errors_total", "", itoa(st.WriteErrors))
}
