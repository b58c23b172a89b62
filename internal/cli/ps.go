package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"
)

var psCommand = command{
	name:    "ps",
	summary: "list a box's live sessions and their running prompts",
	run:     runPs,
}

func runPs(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON bool
	fs := newFlags(stdio, "ps", "ps [--url URL --key KEY | --box NAME] [--json]   (also: gbx sessions)\n\nLists the box's live sessions, persistent and paused ones included (GET /sessions: the key or an admin token): who\nopened each, its state (idle, running, detached: waiting for a resume,\npaused: detached with its processes frozen; persistent: kept across the\nkit's restarts), the running prompt and how long it has run, queued\nprompts, prompts run, and when it was last active."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: ps takes no arguments", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := b.Sessions(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, l)
	}
	if len(l.Sessions) == 0 {
		fmt.Fprintln(stdio.Stdout, "no sessions")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tOWNER\tSTATE\tPROMPT\tRUNNING\tQUEUED\tPROMPTS\tAGE\tIDLE")
	for _, s := range l.Sessions {
		prompt, running := "-", "-"
		if r := s.Running; r != nil {
			prompt, running = r.ID, ago(time.Duration(r.DurationMS)*time.Millisecond)
		}
		state := s.State
		if s.Persistent {
			state += ",persistent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.ID, s.Owner, state, prompt, running,
			s.Queued, s.Prompts, ago(now.Sub(s.Created)), ago(now.Sub(s.LastActivity)))
	}
	return tw.Flush()
}

// ago shows a duration to a person: 850ms, 12s, 4m10s, 3h2m, 2d4h.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}
