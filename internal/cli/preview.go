package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

var previewCommand = command{
	name:    "preview",
	summary: "open a session's port to a browser: print a signed, expiring preview URL",
	run:     runPreview,
}

const previewHelp = `preview [--url URL --key KEY | --box NAME] [--session ID] [--ttl 1h] [--json] PORT
       gbx preview ls [--session ID] [--json]
       gbx preview revoke [--session ID] LINK_ID

Prints a URL at which a browser reaches PORT, a port a process of the
session listens on inside its own network namespace (POST
/sessions/{id}/previews: the key, a preview token or the session's own
connect token). The URL carries a signed link that expires after --ttl
(default 1h, at most 7d); the first visit trades it for a cookie of the
preview's own host. An API client sends the link (--json prints it) as
"Authorization: Bearer LINK" instead. ls lists the session's live links;
revoke makes one answer 410 Gone.

The box must set [preview] domain in glovebox.toml, with wildcard DNS for
*.DOMAIN pointing at it (docs/previews.md). Without --session, the box's
only live session is used (GET /sessions needs the key or an admin
token).`

func runPreview(ctx context.Context, stdio IO, args []string) error {
	sub := ""
	if len(args) > 0 && (args[0] == "ls" || args[0] == "revoke") {
		sub, args = args[0], args[1:]
	}
	var bf boxFlags
	var session, ttl string
	var asJSON bool
	fs := newFlags(stdio, "preview", previewHelp+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&session, "session", "", "the session whose port to preview (default: the box's only live session)")
	fs.StringVar(&ttl, "ttl", "", "how long the link works (\"30m\", \"1h\", \"7d\"; default 1h)")
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON (with the link itself)")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	var ttlD time.Duration
	if ttl != "" {
		d, err := protocol.ParseDuration(ttl)
		if err != nil {
			return fmt.Errorf("%w: --ttl: %v", ErrUsage, err)
		}
		ttlD = d
	}
	want := 1
	if sub == "ls" {
		want = 0
	}
	if fs.NArg() != want {
		switch sub {
		case "ls":
			return fmt.Errorf("%w: preview ls takes no arguments", ErrUsage)
		case "revoke":
			return fmt.Errorf("%w: preview revoke takes the link id (gbx preview ls lists them)", ErrUsage)
		}
		return fmt.Errorf("%w: preview takes one port", ErrUsage)
	}
	port := 0
	if sub == "" {
		p, err := strconv.Atoi(fs.Arg(0))
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("%w: port %q: want a TCP port from 1 to 65535", ErrUsage, fs.Arg(0))
		}
		port = p
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	if session == "" {
		if session, err = onlySession(ctx, b); err != nil {
			return err
		}
	}
	switch sub {
	case "ls":
		l, err := b.Previews(ctx, session)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdio.Stdout, protocol.PreviewList{Previews: l})
		}
		if len(l) == 0 {
			fmt.Fprintln(stdio.Stdout, "no preview links")
			return nil
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "LINK\tPORT\tEXPIRES\tURL")
		for _, p := range l {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", p.ID, p.Port, p.Expires.Format(time.RFC3339), p.URL)
		}
		return tw.Flush()
	case "revoke":
		if err := b.RevokePreview(ctx, session, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stdio.Stderr, "revoked %s\n", fs.Arg(0))
		return nil
	}
	p, err := b.Preview(ctx, session, port, ttlD)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, p)
	}
	fmt.Fprintln(stdio.Stdout, p.URL)
	fmt.Fprintf(stdio.Stderr, "port %d of session %s until %s (link %s; gbx preview revoke %s ends it)\n", p.Port, p.Session, p.Expires.Format(time.RFC3339), p.ID, p.ID)
	return nil
}

// onlySession is the box's one live session.
func onlySession(ctx context.Context, b *client.Box) (string, error) {
	l, err := b.Sessions(ctx)
	if err != nil {
		return "", fmt.Errorf("find the session (or name it with --session): %w", err)
	}
	switch len(l.Sessions) {
	case 0:
		return "", errors.New("the box has no live session: open one (gbx prompt) or name one with --session")
	case 1:
		return l.Sessions[0].ID, nil
	}
	ids := make([]string, len(l.Sessions))
	for i, s := range l.Sessions {
		ids[i] = s.ID
	}
	return "", fmt.Errorf("%w: the box has %d live sessions (%s): name one with --session", ErrUsage, len(ids), strings.Join(ids, ", "))
}
