package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// row is one line of the table: a measure, its median, its spread (p99,
// or min and max), how many runs, and what it is compared with.
type row struct {
	measure, median, spread string
	runs                    int
	floor                   string
}

// durRow makes the row of a timed measure: median and p99.
func durRow(measure string, ds []time.Duration, floor string) row {
	med, p99 := pct(ds)
	return row{measure: measure, median: dur(med), spread: "p99 " + dur(p99), runs: len(ds), floor: floor}
}

// dur rounds d for the table: three significant figures or so.
func dur(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(100 * time.Nanosecond).String()
}

// printTable writes rows as one aligned table.
func printTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\tspread\truns\tcompared with")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.measure, r.median, r.spread, r.runs, r.floor)
	}
	return tw.Flush()
}

func pct(ds []time.Duration) (time.Duration, time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2], s[len(s)*99/100]
}

// table measures time to the first command, warm and cold, across
// processes, and returns its rows. agentJS is the SDK test agent's
// script (empty: skip the ACP rows).
func table(kitPath string, n int, agentJS, sandboxAgent string) ([]row, error) {
	var rows []row
	// The floor: fork/exec of sh -c true to its exit.
	var floor []time.Duration
	for range n {
		t0 := time.Now()
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			return nil, err
		}
		floor = append(floor, time.Since(t0))
	}
	rows = append(rows, durRow("fork/exec of sh -c true, to its exit", floor, "the floor of the first-prompt rows"))
	if sandboxAgent != "" {
		ds, err := sandboxAgentRun(sandboxAgent, max(n, 5)*5)
		if err != nil {
			return nil, fmt.Errorf("sandbox-agent: %w", err)
		}
		rows = append(rows, durRow("sandbox-agent: POST /v1/processes/run sh -c true, request to result", ds, "its own, at "+sandboxAgent))
		const mock = "sandbox-agent: mock agent, session/new + session/prompt answered (one running agent process for all)"
		if ds, err = sandboxAgentSessions(sandboxAgent, max(n, 5)*5); err != nil {
			// Its agents are installed apart (sandbox-agent install-agent
			// mock): the row says so, the other rows are measured.
			rows = append(rows, row{measure: mock, median: "-", spread: "-", floor: "not measured: " + err.Error()})
		} else {
			rows = append(rows, durRow(mock, ds, "its own, at "+sandboxAgent))
		}
	}

	type variant struct {
		name, manifest string
		warm           int
	}
	variants := []variant{
		{"exec agent, cold, every layer", `{"name":"bench","agent":{"type":"exec","warm":0}}`, 0},
		{"exec agent, warm, every layer", `{"name":"bench","agent":{"type":"exec","warm":1}}`, 1},
		{"exec agent, cold, sandbox off", `{"name":"bench","agent":{"type":"exec","warm":0},"sandbox":{"enabled":false}}`, 0},
	}
	if agentJS != "" {
		cmd, _ := json.Marshal([]string{"node", agentJS})
		variants = append(variants,
			variant{"SDK ACP agent, cold, every layer", `{"name":"bench","agent":{"type":"acp","command":` + string(cmd) + `,"warm":0}}`, 0},
			variant{"SDK ACP agent, warm, every layer", `{"name":"bench","agent":{"type":"acp","command":` + string(cmd) + `,"warm":1}}`, 1},
		)
	}
	for _, v := range variants {
		k, _, err := startWith(kitPath, v.manifest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		layers, _ := isolation(k)
		var first, next []time.Duration
		for i := range n {
			if v.warm > 0 {
				// A warm figure is for a box that had the time to get
				// ready: wait until /environment says the pool is full.
				if err := waitWarm(k, v.warm); err != nil {
					k.stop()
					return nil, fmt.Errorf("%s: %w", v.name, err)
				}
			}
			f, nx, err := sessionAndPrompts(k, i < max(2, n/5))
			if err != nil {
				k.stop()
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}
			first = append(first, f)
			next = append(next, nx...)
		}
		k.stop()
		rows = append(rows, durRow(v.name+": new session + first prompt `true` answered", first, "fork/exec floor; layers: "+layers))
		if v.warm == 0 && len(next) > 0 {
			rows = append(rows, durRow(v.name+": a later prompt `true`, prompt to result", next, "fork/exec floor; layers: "+layers))
		}
	}
	return rows, nil
}

// promptTrue runs the prompt `true` on c and reads to its complete.
func promptTrue(c *wsconn.Conn, id string) error {
	if err := c.WriteText([]byte(`{"type":"prompt","id":"` + id + `","text":"true","inputs":{}}`)); err != nil {
		return err
	}
	for {
		b, err := c.ReadMessage()
		if err != nil {
			return err
		}
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if m.Type == "error" {
			return fmt.Errorf("prompt failed: %s", b)
		}
		if m.Type == "complete" {
			return nil
		}
	}
}

// commands times a command on a live session, prompt `true` to its
// complete, every layer and sandbox off, n times each, alternated in one
// loop with kitbench's own fork/exec of sh -c true and, given its URL,
// sandbox-agent's process run of it: the ratios are of figures taken in
// the same minutes.
func commands(kitPath string, n int, sandboxAgent string) ([]row, error) {
	type live struct {
		name string
		k    *kitProc
		c    *wsconn.Conn
		ds   []time.Duration
	}
	var ls []*live
	defer func() {
		for _, l := range ls {
			if l.c != nil {
				l.c.Close()
			}
			l.k.stop()
		}
	}()
	for _, v := range []struct{ name, manifest string }{
		{"every layer", `{"name":"bench","agent":{"type":"exec","warm":0}}`},
		{"sandbox off", `{"name":"bench","agent":{"type":"exec","warm":0},"sandbox":{"enabled":false}}`},
	} {
		k, _, err := startWith(kitPath, v.manifest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		l := &live{name: v.name, k: k}
		ls = append(ls, l)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		l.c, _, err = wsconn.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		l.c.SetReadDeadline(time.Now().Add(time.Hour))
		if _, err := l.c.ReadMessage(); err != nil { // hello
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		if err := promptTrue(l.c, "warm"); err != nil { // the session's supervisor starts
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	var floor, sa []time.Duration
	for i := range n {
		t0 := time.Now()
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			return nil, err
		}
		floor = append(floor, time.Since(t0))
		if sandboxAgent != "" {
			d, err := sandboxAgentOnce(client, sandboxAgent)
			if err != nil {
				return nil, fmt.Errorf("sandbox-agent: %w", err)
			}
			sa = append(sa, d)
		}
		for _, l := range ls {
			t0 := time.Now()
			if err := promptTrue(l.c, "c"+strconv.Itoa(i)); err != nil {
				return nil, fmt.Errorf("%s: %w", l.name, err)
			}
			l.ds = append(l.ds, time.Since(t0))
		}
	}
	fm, _ := pct(floor)
	rows := []row{durRow("fork/exec of sh -c true, to its exit, alternated with the next rows", floor, "the floor")}
	var sm time.Duration
	if len(sa) > 0 {
		sm, _ = pct(sa)
		rows = append(rows, durRow("sandbox-agent: POST /v1/processes/run sh -c true, alternated", sa, "its own, at "+sandboxAgent))
	}
	for _, l := range ls {
		lm, l99 := pct(l.ds)
		_, f99 := pct(floor)
		rows = append(rows,
			durRow("a command on a live session, "+l.name+": prompt `true` to its complete", l.ds, "the floor; sandbox-agent"),
			row{measure: "  the same / fork/exec floor", median: ratio(lm, fm), spread: "p99 " + ratio(l99, f99), runs: n, floor: "goal <= 1.5x"})
		if len(sa) > 0 {
			_, s99 := pct(sa)
			rows = append(rows, row{measure: "  sandbox-agent's run / the same", median: ratio(sm, lm), spread: "p99 " + ratio(s99, l99), runs: n, floor: "goal >= 1.0x"})
		}
	}
	return rows, nil
}

// sessionAndPrompts dials a new session and times it to its first prompt's
// complete; with more it then times five more prompts, prompt to result.
func sessionAndPrompts(k *kitProc, more bool) (time.Duration, []time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	c, _, err := wsconn.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.ReadMessage(); err != nil {
		return 0, nil, err
	}
	prompt := func(id string) error { return promptTrue(c, id) }
	if err := prompt("p0"); err != nil {
		return 0, nil, err
	}
	first := time.Since(t0)
	var next []time.Duration
	if more {
		for i := range 5 {
			t1 := time.Now()
			if err := prompt("p" + strconv.Itoa(i+1)); err != nil {
				return 0, nil, err
			}
			next = append(next, time.Since(t1))
		}
	}
	return first, next, nil
}

// sandboxAgentOnce times one run of sh -c true by sandbox-agent's
// one-shot process API.
func sandboxAgentOnce(client *http.Client, base string) (time.Duration, error) {
	t0 := time.Now()
	resp, err := client.Post(base+"/v1/processes/run", "application/json", strings.NewReader(`{"command":"sh","args":["-c","true"]}`))
	if err != nil {
		return 0, err
	}
	var r struct{ ExitCode *int }
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		return 0, fmt.Errorf("run sh -c true: status %s, %v", resp.Status, err)
	}
	return time.Since(t0), nil
}

// sandboxAgentRun times sandbox-agent's one-shot process API running
// sh -c true, over a kept-alive HTTP connection.
func sandboxAgentRun(base string, n int) ([]time.Duration, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	var ds []time.Duration
	for range n {
		d, err := sandboxAgentOnce(client, base)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// sandboxAgentSessions times, on sandbox-agent's built-in mock agent
// (started and initialised once, then shared, as sandbox-agent runs
// agents), a session/new and a session/prompt, each a JSON-RPC POST.
func sandboxAgentSessions(base string, n int) ([]time.Duration, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	url := base + "/v1/acp/kitbench-" + strconv.Itoa(os.Getpid())
	post := func(u, body string) (json.RawMessage, error) {
		resp, err := client.Post(u, "application/json", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var r struct {
			Result json.RawMessage
			Error  json.RawMessage
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || r.Result == nil {
			return nil, fmt.Errorf("POST %s: status %s, error %s, %v", u, resp.Status, r.Error, err)
		}
		return r.Result, nil
	}
	if _, err := post(url+"?agent=mock", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`); err != nil {
		return nil, err
	}
	var ds []time.Duration
	for i := range n {
		t0 := time.Now()
		res, err := post(url, `{"jsonrpc":"2.0","id":`+strconv.Itoa(2*i+1)+`,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
		if err != nil {
			return nil, err
		}
		var ns struct{ SessionID string }
		json.Unmarshal(res, &ns)
		if ns.SessionID == "" {
			ns.SessionID = "s" + strconv.Itoa(i) // the mock agent echoes instead of answering
		}
		if _, err := post(url, `{"jsonrpc":"2.0","id":`+strconv.Itoa(2*i+2)+`,"method":"session/prompt","params":{"sessionId":"`+ns.SessionID+`","prompt":[{"type":"text","text":"true"}]}}`); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

// waitWarm waits until the kit's /environment reports n warm sessions
// ready.
func waitWarm(k *kitProc, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(k.port)+"/environment", nil)
	req.Header.Set("Authorization", "Bearer "+k.key)
	for {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var env protocol.Environment
			json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if env.Warm != nil && env.Warm.Ready >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kit did not report %d warm sessions ready within 2 minutes", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// sdkAgent finds the SDK test agent beside this command's source, when its
// npm packages are installed and node runs.
func sdkAgent() string {
	if _, err := exec.LookPath("node"); err != nil {
		return ""
	}
	for _, dir := range []string{"kit/agent/acp/testdata/agent", "../../agent/acp/testdata/agent"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")); err == nil {
			abs, _ := filepath.Abs(filepath.Join(dir, "agent.mjs"))
			return abs
		}
	}
	return ""
}
