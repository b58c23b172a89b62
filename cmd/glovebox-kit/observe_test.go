package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// kitLog collects a kit process's JSON log lines as they come.
type kitLog struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
	bad   []string
}

func (l *kitLog) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestObservability runs the real glovebox-kit with JSON logs, prompts it,
// and reads what an operator sees: the log lines on stderr, GET /sessions,
// GET /metrics (parsed by a strict exposition parser) and GET /logs.
func TestObservability(t *testing.T) {
	key := protocol.NewKey()
	cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0", "GLOVEBOX_LOG_FORMAT=json", "GLOVEBOX_LOG=info")
	cmd.Args = append(cmd.Args, "--manifest", writeManifest(t, key, "exec"), "--root", t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	logs := &kitLog{}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			logs.mu.Lock()
			logs.raw = append(logs.raw, sc.Text())
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				logs.bad = append(logs.bad, sc.Text())
			} else {
				logs.lines = append(logs.lines, m)
			}
			logs.mu.Unlock()
			if m["msg"] == "glovebox-kit serving" {
				addr <- m["addr"].(string)
			}
		}
	}()
	a := testkit.Recv(t, addr, "the kit's serving line")
	base := "http://127.0.0.1:" + a[strings.LastIndex(a, ":")+1:]

	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(base, "http")+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	final := func(id string) map[string]any {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(testkit.Timeout))
		for {
			b, err := c.ReadMessage()
			if err != nil {
				t.Fatalf("waiting for prompt %s to end: %v", id, err)
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			if (m["type"] == "complete" || m["type"] == "error") && m["id"] == id {
				return m
			}
		}
	}
	const secret = "SECRET-PROMPT-TEXT-4711"
	c.WriteText([]byte(`{"type":"prompt","id":"p1","text":"echo ` + secret + `; printf abcde > \"$GLOVEBOX_OUTPUT/o.txt\"; exit 3","inputs":{}}`))
	if m := final("p1"); m["type"] != "complete" {
		t.Fatalf("p1 ended with %v", m)
	}
	c.WriteText([]byte(`{"type":"prompt","id":"p2","text":"true","inputs":{"../x":{"kind":"inline","name":"x","data":""}}}`))
	if m := final("p2"); m["type"] != "error" {
		t.Fatalf("p2 ended with %v, want an InputError", m)
	}

	get := func(path, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(testkit.Context(t, "GET "+path), http.MethodGet, base+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	mint := func(scope string) string {
		tok, err := protocol.MintToken(key, protocol.TokenClaims{Scopes: []string{scope}, Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	// /sessions: the one session, idle, two prompts run.
	code, body := get("/sessions", key)
	var list protocol.SessionList
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Sessions) != 1 {
		t.Fatalf("GET /sessions = %d %s", code, body)
	}
	if s := list.Sessions[0]; s.Owner != "key" || s.State != protocol.SessionIdle || s.Prompts != 2 || s.Running != nil {
		t.Errorf("session = %+v, want the key's, idle, 2 prompts", s)
	}
	if code, _ := get("/sessions", mint(protocol.ScopeConnect)); code != 401 {
		t.Errorf("GET /sessions with a connect token = %d, want 401", code)
	}

	// /metrics: 401 without the scope, then a valid exposition.
	for _, bearer := range []string{"", "wrong", mint(protocol.ScopeConnect)} {
		if code, _ := get("/metrics", bearer); code != 401 {
			t.Errorf("GET /metrics with %q = %d, want 401", bearer, code)
		}
	}
	code, body = get("/metrics", mint(protocol.ScopeMetrics))
	if code != 200 {
		t.Fatalf("GET /metrics = %d %s", code, body)
	}
	fams, err := parseExposition(body)
	if err != nil {
		t.Fatalf("GET /metrics is not a valid exposition: %v\n%s", err, body)
	}
	for _, w := range []struct {
		name   string
		labels string
		min    float64
		max    float64
	}{
		{"glovebox_sessions_open", "", 1, 1},
		{"glovebox_sessions_total", "", 1, 1},
		{"glovebox_prompts_total", `outcome="complete"`, 1, 1},
		{"glovebox_prompts_total", `outcome="InputError"`, 1, 1},
		{"glovebox_prompt_duration_seconds_count", "", 2, 2},
		{"glovebox_events_sent_total", "", 2, math.Inf(1)}, // stdout and exit at least
		{"glovebox_bytes_sent_total", "", 100, math.Inf(1)},
		{"glovebox_queue_depth", "", 0, 0},
		{"glovebox_sandbox_limit_errors_total", "", 0, 0},
		{"glovebox_egress_decisions_total", `decision="deny"`, 0, 0},
		{"process_resident_memory_bytes", "", 1 << 20, math.Inf(1)},
	} {
		v, ok := fams.value(w.name, w.labels)
		if !ok || v < w.min || v > w.max {
			t.Errorf("%s{%s} = %v (found %v), want %v to %v", w.name, w.labels, v, ok, w.min, w.max)
		}
	}

	// The session's close line comes when the client closes.
	c.WriteClose(wsconn.CloseNormal, "bye", time.Now().Add(time.Second))
	testkit.Until(t, "the session closed log line", func() bool { return len(logs.find("session closed")) == 1 })

	// /logs: the same records, to a logs token.
	if code, _ := get("/logs", mint(protocol.ScopeMetrics)); code != 401 {
		t.Errorf("GET /logs with a metrics token = %d, want 401", code)
	}
	code, body = get("/logs", mint(protocol.ScopeLogs))
	if code != 200 || !strings.Contains(body, `"msg":"session closed"`) || !strings.Contains(body, `"prompt":"p1"`) {
		t.Errorf("GET /logs = %d:\n%s", code, body)
	}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("GET /logs line is not JSON: %q", line)
		}
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := testkit.Exit(t, cmd, "the kit after SIGTERM"); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	testkit.Wait(t, scanned, "the end of the kit's stderr")

	// The scanner has finished: the lines are ours alone now.
	if len(logs.bad) > 0 {
		t.Errorf("stderr lines that are not JSON with GLOVEBOX_LOG_FORMAT=json: %q", logs.bad)
	}
	for _, line := range logs.raw {
		if strings.Contains(line, secret) || strings.Contains(line, key) {
			t.Errorf("a log line holds the prompt's text or the key: %s", line)
		}
	}
	opened, closed := logs.find("session opened"), logs.find("session closed")
	prompts := logs.find("prompt")
	if len(opened) != 1 || len(closed) != 1 || len(prompts) != 2 {
		t.Fatalf("log lines: %d session opened, %d session closed, %d prompt; want 1, 1, 2:\n%s", len(opened), len(closed), len(prompts), strings.Join(logs.raw, "\n"))
	}
	sid := opened[0]["session"]
	p1, p2 := prompts[0], prompts[1]
	for name, got := range map[string]any{
		"opened level":     opened[0]["level"],
		"opened owner":     opened[0]["owner"],
		"p1 session":       p1["session"],
		"p1 id":            p1["prompt"],
		"p1 outcome":       p1["outcome"],
		"p1 exit":          p1["exit_code"],
		"p1 outputs":       p1["outputs"],
		"p1 output bytes":  p1["output_bytes"],
		"p2 id":            p2["prompt"],
		"p2 outcome":       p2["outcome"],
		"closed session":   closed[0]["session"],
		"closed prompts":   closed[0]["prompts"],
		"closed cause":     closed[0]["cause"],
		"p2 has exit code": p2["exit_code"] != nil,
	} {
		want := map[string]any{
			"opened level": "INFO", "opened owner": "key", "p1 session": sid, "p1 id": "p1", "p1 outcome": "complete",
			"p1 exit": 3.0, "p1 outputs": 1.0, "p1 output bytes": 5.0, "p2 id": "p2", "p2 outcome": "InputError",
			"closed session": sid, "closed prompts": 2.0, "closed cause": "connection closed", "p2 has exit code": false,
		}[name]
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for _, k := range []string{"duration_ms", "frames", "events", "bytes"} {
		if v, ok := closed[0][k].(float64); !ok || v < 0 || (k != "duration_ms" && v == 0) {
			t.Errorf("session closed %s = %v", k, closed[0][k])
		}
	}
	if _, ok := p1["duration_ms"].(float64); !ok {
		t.Errorf("prompt line has no duration_ms: %v", p1)
	}
}

// exposition is a parsed Prometheus text exposition.
type exposition struct {
	types   map[string]string
	samples map[string]float64 // name + "{" + labels + "}" -> value
}

func (e *exposition) value(name, labels string) (float64, bool) {
	v, ok := e.samples[name+"{"+labels+"}"]
	return v, ok
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition parses the text format strictly: every family has one
// HELP and one TYPE line before its samples, samples belong to the family
// declared last, series are unique, label values use only the escapes \\,
// \" and \n, counters are not negative, and a histogram's buckets have
// increasing le bounds, non-decreasing counts, end with +Inf and agree
// with _count.
func parseExposition(text string) (*exposition, error) {
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("does not end with a newline")
	}
	e := &exposition{types: map[string]string{}, samples: map[string]float64{}}
	helps := map[string]bool{}
	family := ""
	type bucket struct{ le, n float64 }
	buckets := map[string][]bucket{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		at := func(err error) error { return fmt.Errorf("line %d %q: %w", i+1, line, err) }
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if !metricNameRE.MatchString(name) || helps[name] {
				return nil, at(fmt.Errorf("bad or repeated HELP"))
			}
			if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(rest, `\\`, ""), `\n`, ""), `\`) {
				return nil, at(fmt.Errorf("bad escape in HELP"))
			}
			helps[name] = true
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if !helps[name] || e.types[name] != "" {
				return nil, at(fmt.Errorf("TYPE without a HELP before it, or repeated"))
			}
			if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, typ) {
				return nil, at(fmt.Errorf("unknown type %q", typ))
			}
			e.types[name] = typ
			family = name
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			return nil, at(fmt.Errorf("unexpected comment or blank line"))
		}
		name, labels, value, err := splitSample(line)
		if err != nil {
			return nil, at(err)
		}
		typ := e.types[family]
		suffix := strings.TrimPrefix(name, family)
		switch {
		case family == "":
			return nil, at(fmt.Errorf("sample before any TYPE"))
		case typ == "histogram" && !slices.Contains([]string{"_bucket", "_sum", "_count"}, suffix):
			return nil, at(fmt.Errorf("histogram sample %s is not %s_bucket, _sum or _count", name, family))
		case typ != "histogram" && name != family:
			return nil, at(fmt.Errorf("sample %s under family %s", name, family))
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, at(fmt.Errorf("value %q: %w", value, err))
		}
		if (typ == "counter" || suffix == "_bucket" || suffix == "_count") && v < 0 {
			return nil, at(fmt.Errorf("negative counter"))
		}
		key := name + "{" + labels + "}"
		if _, dup := e.samples[key]; dup {
			return nil, at(fmt.Errorf("repeated series"))
		}
		e.samples[key] = v
		if suffix == "_bucket" && typ == "histogram" {
			le, ok := strings.CutPrefix(labels, `le="`)
			if !ok || !strings.HasSuffix(le, `"`) {
				return nil, at(fmt.Errorf("bucket without an le label"))
			}
			bound, err := strconv.ParseFloat(strings.TrimSuffix(le, `"`), 64)
			if err != nil {
				return nil, at(fmt.Errorf("le: %w", err))
			}
			bs := buckets[family]
			if n := len(bs); n > 0 && (bound <= bs[n-1].le || v < bs[n-1].n) {
				return nil, at(fmt.Errorf("buckets not increasing in le or decreasing in count"))
			}
			buckets[family] = append(bs, bucket{bound, v})
		}
	}
	for fam, typ := range e.types {
		if typ != "histogram" {
			continue
		}
		bs := buckets[fam]
		if len(bs) == 0 || !math.IsInf(bs[len(bs)-1].le, 1) {
			return nil, fmt.Errorf("histogram %s has no +Inf bucket", fam)
		}
		if n, ok := e.value(fam+"_count", ""); !ok || n != bs[len(bs)-1].n {
			return nil, fmt.Errorf("histogram %s: _count %v is not the +Inf bucket's %v", fam, n, bs[len(bs)-1].n)
		}
		if _, ok := e.value(fam+"_sum", ""); !ok {
			return nil, fmt.Errorf("histogram %s has no _sum", fam)
		}
	}
	return e, nil
}

// splitSample splits `name{l="v",...} value` and checks the labels; it
// returns the labels as written, without braces.
func splitSample(line string) (name, labels, value string, err error) {
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		return "", "", "", fmt.Errorf("no value")
	}
	name = line[:end]
	if !metricNameRE.MatchString(name) {
		return "", "", "", fmt.Errorf("bad metric name %q", name)
	}
	rest := line[end:]
	if strings.HasPrefix(rest, "{") {
		i := 1
		for {
			eq := strings.IndexByte(rest[i:], '=')
			if eq < 0 {
				return "", "", "", fmt.Errorf("label without =")
			}
			if ln := rest[i : i+eq]; !labelNameRE.MatchString(ln) {
				return "", "", "", fmt.Errorf("bad label name %q", ln)
			}
			i += eq + 1
			if i >= len(rest) || rest[i] != '"' {
				return "", "", "", fmt.Errorf("label value not quoted")
			}
			i++
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' {
					i++
					if i >= len(rest) || !strings.ContainsRune(`\"n`, rune(rest[i])) {
						return "", "", "", fmt.Errorf("bad escape in a label value")
					}
				}
				if rest[i] == '\n' {
					return "", "", "", fmt.Errorf("raw newline in a label value")
				}
			}
			if i >= len(rest) {
				return "", "", "", fmt.Errorf("unterminated label value")
			}
			i++
			if i < len(rest) && rest[i] == ',' {
				i++
				continue
			}
			if i >= len(rest) || rest[i] != '}' {
				return "", "", "", fmt.Errorf("labels not closed")
			}
			labels = rest[1:i]
			rest = rest[i+1:]
			break
		}
	}
	value, ok := strings.CutPrefix(rest, " ")
	if !ok || value == "" || strings.Contains(value, " ") {
		return "", "", "", fmt.Errorf("want one space and a value (no timestamp)")
	}
	return name, labels, value, nil
}

func TestParseExpositionRefuses(t *testing.T) {
	ok := "# HELP a x\n# TYPE a counter\na 1\n"
	if _, err := parseExposition(ok); err != nil {
		t.Fatalf("parseExposition(valid) = %v", err)
	}
	for name, text := range map[string]string{
		"no newline":       "# HELP a x\n# TYPE a counter\na 1",
		"no help":          "# TYPE a counter\na 1\n",
		"foreign sample":   "# HELP a x\n# TYPE a counter\nb 1\n",
		"bad escape":       "# HELP a x\n# TYPE a gauge\na{l=\"\\q\"} 1\n",
		"unquoted":         "# HELP a x\n# TYPE a gauge\na{l=v} 1\n",
		"duplicate":        "# HELP a x\n# TYPE a gauge\na 1\na 2\n",
		"negative counter": "# HELP a x\n# TYPE a counter\na -1\n",
		"no +Inf":          "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
		"not monotonic":    "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
		"count differs":    "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n",
	} {
		if _, err := parseExposition(text); err == nil {
			t.Errorf("parseExposition(%s) = nil, want an error", name)
		}
	}
}
