package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

const egressUsage = `egress log [--follow] [--session ID] [--since SEQ|10m|TIME] [--json] | suggest [--url URL --key KEY | --box NAME]

The box's egress audit trail (GET /egress/log: the key, or a token with the
audit or admin scope): every connection its agents made or tried, one line a
decision: time, session, host:port, the verdict, the rule and its
glovebox.toml line, the addresses resolved, bytes each way, brokered secrets,
and the client's answer when the box asked ([network] ask).
  log      print the decisions the box keeps; --follow streams new ones until Ctrl-C
  suggest  print the [network] allow lines the trail suggests: hosts approved
           for the box or a session, and hosts no rule covered that were blocked`

// runEgressAudit runs gbx egress log and gbx egress suggest: args[0] is
// the verb.
func runEgressAudit(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var follow, asJSON bool
	var since, session string
	fs := newFlags(stdio, "egress "+args[0], egressUsage+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVarP(&follow, "follow", "f", false, "log: keep streaming new decisions until Ctrl-C")
	fs.StringVar(&session, "session", "", "only this session's decisions")
	fs.StringVar(&since, "since", "", "only decisions after this seq (42), from this long ago (10m) or since this time (RFC 3339)")
	fs.BoolVar(&asJSON, "json", false, "log: print each decision as the box's JSON line")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	verb := fs.Arg(0)
	if fs.NArg() != 1 || (verb != "log" && verb != "suggest") {
		return fmt.Errorf("%w: want gbx egress log or gbx egress suggest", ErrUsage)
	}
	if verb == "suggest" && (follow || asJSON) {
		return fmt.Errorf("%w: --follow and --json are for gbx egress log", ErrUsage)
	}
	o := client.EgressLogOptions{Session: session, Follow: follow}
	if since != "" {
		if n, err := strconv.ParseUint(since, 10, 64); err == nil {
			o.AfterSeq = n
		} else if d, err := time.ParseDuration(since); err == nil && d >= 0 {
			o.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, since); err == nil {
			o.Since = t
		} else {
			return fmt.Errorf("%w: --since %q: want a seq (42), a duration (10m) or an RFC 3339 time (2026-01-02T15:04:05Z)", ErrUsage, since)
		}
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	var all []protocol.EgressEvent
	for ev, err := range b.EgressLog(ctx, o) {
		if err != nil {
			return err
		}
		switch {
		case verb == "suggest":
			all = append(all, ev)
		case asJSON:
			line, _ := json.Marshal(ev)
			stdio.Stdout.Write(append(line, '\n'))
		default:
			fmt.Fprintln(stdio.Stdout, formatDecision(ev))
		}
	}
	if verb == "suggest" {
		writeSuggestions(stdio.Stdout, all)
	}
	return nil
}

// formatDecision shows a decision as one line of text.
func formatDecision(ev protocol.EgressEvent) string {
	if ev.Seq == 0 {
		return "-- " + ev.Reason
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%6d %s %-5s %-7s %s", ev.Seq, ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Decision, ev.Proto, hostPortText(ev.Host, ev.Port))
	if ev.Rule != "" {
		fmt.Fprintf(&b, " rule=%s", strconv.Quote(ev.Rule))
	}
	if ev.Ask != "" {
		fmt.Fprintf(&b, " asked=%s", ev.Ask)
	}
	if len(ev.Addrs) > 0 {
		fmt.Fprintf(&b, " addrs=%s", strings.Join(ev.Addrs, ","))
	}
	if ev.BytesOut > 0 || ev.BytesIn > 0 {
		fmt.Fprintf(&b, " out=%d in=%d", ev.BytesOut, ev.BytesIn)
	}
	if len(ev.Brokered) > 0 {
		fmt.Fprintf(&b, " brokered=%s", strings.Join(ev.Brokered, ","))
	}
	if ev.Scrubbed > 0 {
		fmt.Fprintf(&b, " scrubbed=%d", ev.Scrubbed)
	}
	if ev.Session != "" {
		fmt.Fprintf(&b, " session=%s", ev.Session)
	}
	return b.String()
}

func hostPortText(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// suggestion is one host:port the trail suggests allowing.
type suggestion struct {
	rule                     string
	box, session, once       int
	blocked, denied, timeout int
	last                     time.Time
}

// writeSuggestions prints the [network] allow lines the trail suggests:
// hosts approved for the box (which the box applied at runtime, and which
// glovebox.toml must say to keep), for a session or once, and hosts no
// rule covered that the default blocked or the client denied.
func writeSuggestions(w io.Writer, evs []protocol.EgressEvent) {
	by := map[string]*suggestion{}
	get := func(ev protocol.EgressEvent) *suggestion {
		rule := hostPortText(ev.Host, ev.Port)
		s := by[rule]
		if s == nil {
			s = &suggestion{rule: rule}
			by[rule] = s
		}
		if ev.Time.After(s.last) {
			s.last = ev.Time
		}
		return s
	}
	for _, ev := range evs {
		switch {
		case ev.Ask == protocol.EgressAskBox:
			get(ev).box++
		case ev.Ask == protocol.EgressAskSession:
			get(ev).session++
		case ev.Ask == protocol.EgressAskOnce:
			get(ev).once++
		case ev.Ask == protocol.EgressAskDeny:
			get(ev).denied++
		case ev.Ask == protocol.EgressAskTimeout:
			get(ev).timeout++
		case ev.Decision == "deny" && ev.Rule == `default = "deny"`:
			get(ev).blocked++
		}
	}
	if len(by) == 0 {
		fmt.Fprintln(w, "# The egress audit trail suggests nothing: no approvals, and no connection was blocked for want of a rule.")
		return
	}
	list := slices.Collect(maps.Values(by))
	// Approved first (for the box, then sessions), then the most blocked.
	slices.SortFunc(list, func(a, b *suggestion) int {
		if c := cmp.Compare(b.box, a.box); c != 0 {
			return c
		}
		if c := cmp.Compare(b.session+b.once, a.session+a.once); c != 0 {
			return c
		}
		if c := cmp.Compare(b.blocked+b.denied+b.timeout, a.blocked+a.denied+a.timeout); c != 0 {
			return c
		}
		return cmp.Compare(a.rule, b.rule)
	})
	fmt.Fprintln(w, "# Add the lines you want to glovebox.toml; approvals for the box are in force only until the box restarts.")
	fmt.Fprintln(w, "[network]")
	fmt.Fprintln(w, "allow = [")
	for _, s := range list {
		var why []string
		for _, p := range []struct {
			n    int
			what string
		}{{s.box, "approved for the box"}, {s.session, "approved for a session"}, {s.once, "approved once"},
			{s.blocked, "blocked by the default"}, {s.denied, "denied when asked"}, {s.timeout, "asked, no answer"}} {
			if p.n > 0 {
				why = append(why, fmt.Sprintf("%s (%d)", p.what, p.n))
			}
		}
		prefix := "  "
		if s.box+s.session+s.once == 0 {
			prefix = "  # " // blocked only: a suggestion to weigh, not an approval
		}
		fmt.Fprintf(w, "%s%s,   # %s; last %s\n", prefix, strconv.Quote(s.rule), strings.Join(why, ", "), s.last.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w, "]")
}
