package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

var snapshotCommand = command{
	name:    "snapshot",
	summary: "snapshot a live session's directories into the box's snapshot store",
	run:     runSnapshot,
}

func runSnapshot(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON bool
	fs := newFlags(stdio, "snapshot", "snapshot [--url URL --key KEY | --box NAME] [--json] SESSION\n\nStores the session's work, input and output directories in the box's snapshot\nstore (POST /sessions/{id}/snapshot: the key, a snapshots or admin token, or the\nsession's own credential): each file once, however many snapshots hold it.\nPrints the snapshot's id; gbx restore ID makes a new session from it."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: snapshot takes one SESSION (gbx ps lists them)", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	info, err := b.SnapshotSession(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, info)
	}
	fmt.Fprintln(stdio.Stdout, info.ID)
	fmt.Fprintf(stdio.Stderr, "%d entries, %s of files (%d new blobs, %s stored)", info.Entries, size(info.Size), info.NewBlobs, size(info.NewBytes))
	if info.Skipped > 0 {
		fmt.Fprintf(stdio.Stderr, ", %d skipped (gbx snapshots show %s)", info.Skipped, info.ID[:12])
	}
	fmt.Fprintln(stdio.Stderr)
	return nil
}

var snapshotsCommand = command{
	name:    "snapshots",
	summary: "list, show or remove the box's snapshots",
	run:     runSnapshots,
}

func runSnapshots(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON bool
	fs := newFlags(stdio, "snapshots", "snapshots [--url URL --key KEY | --box NAME] [--json] [ls | show ID | rm ID]\n\nLists the box's snapshots, newest first (GET /snapshots: the key, a snapshots\nor admin token); show prints one's manifest (every entry, and what was left\nout); rm deletes one (its files stay in the store while another snapshot\nholds them)."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	verb := "ls"
	if fs.NArg() > 0 {
		verb = fs.Arg(0)
	}
	want := map[string]int{"ls": 1, "show": 2, "rm": 2}[verb]
	if want == 0 || fs.NArg() > want || verb != "ls" && fs.NArg() != want {
		return fmt.Errorf("%w: snapshots takes ls, show ID or rm ID", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	switch verb {
	case "rm":
		if err := b.DeleteSnapshot(ctx, fs.Arg(1)); err != nil {
			return err
		}
		fmt.Fprintln(stdio.Stderr, "removed snapshot", fs.Arg(1))
		return nil
	case "show":
		m, err := b.SnapshotManifest(ctx, fs.Arg(1))
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdio.Stdout, m)
		}
		tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TYPE\tMODE\tSIZE\tPATH")
		for _, e := range m.Entries {
			p := e.Root + "/" + e.Path
			if e.Type == protocol.SnapshotSymlink {
				p += " -> " + e.Target
			}
			fmt.Fprintf(tw, "%s\t%04o\t%s\t%s\n", e.Type, e.Mode, size(e.Size), p)
		}
		for _, s := range m.Skipped {
			fmt.Fprintf(tw, "skipped\t-\t-\t%s/%s (%s)\n", s.Root, s.Path, s.Reason)
		}
		return tw.Flush()
	}
	l, err := b.Snapshots(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, l)
	}
	if len(l.Snapshots) == 0 {
		fmt.Fprintln(stdio.Stdout, "no snapshots")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SNAPSHOT\tSESSION\tOWNER\tENTRIES\tSIZE\tAGE")
	for _, s := range l.Snapshots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.Session, s.Owner, s.Entries, size(s.Size), ago(now.Sub(s.Created)))
	}
	return tw.Flush()
}

var restoreCommand = command{
	name:    "restore",
	summary: "make a new session from a snapshot",
	run:     runRestore,
}

func runRestore(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON, force bool
	fs := newFlags(stdio, "restore", "restore [--url URL --key KEY | --box NAME] [--force] [--json] SNAPSHOT\n\nMakes a new session whose directories hold the snapshot's files (POST\n/snapshots/{id}/restore: the key, a snapshots or admin token). The whole\nsnapshot is checked first: a corrupt or partial one makes nothing. A snapshot\nof another image is refused unless --force. Prints the session's id: send it\nprompts with gbx prompt --session ID within the box's resume grace."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVar(&force, "force", false, "restore a snapshot of another image (programs built against its store paths may not run)")
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: restore takes one SNAPSHOT (gbx snapshots lists them)", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := b.Restore(ctx, fs.Arg(0), force)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, res)
	}
	fmt.Fprintln(stdio.Stdout, res.Session)
	for _, w := range res.Warnings {
		fmt.Fprintln(stdio.Stderr, "warning:", w)
	}
	return nil
}

var forkCommand = command{
	name:    "fork",
	summary: "copy a live session into new sessions",
	run:     runFork,
}

func runFork(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON bool
	var n int
	fs := newFlags(stdio, "fork", "fork [--url URL --key KEY | --box NAME] [-n N] [--json] SESSION\n\nCopies a live session's directories into N new sessions, each in its own\nsandbox (POST /sessions/{id}/fork: the key, a snapshots or admin token, or the\nsession's own credential): cloned where the file system can (reflinks), else\ncopied. Prints the new sessions' ids, one per line: send them prompts with\ngbx prompt --session ID within the box's resume grace."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.IntVarP(&n, "count", "n", 1, "how many sessions (1 to 16)")
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: fork takes one SESSION (gbx ps lists them)", ErrUsage)
	}
	if n < 1 || n > 16 {
		return fmt.Errorf("%w: -n %d: ask for 1 to 16 sessions", ErrUsage, n)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := b.Fork(ctx, fs.Arg(0), n)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, res)
	}
	for _, id := range res.Sessions {
		fmt.Fprintln(stdio.Stdout, id)
	}
	fmt.Fprintf(stdio.Stderr, "%d sessions (%s)\n", len(res.Sessions), res.Method)
	return nil
}

// size shows a byte count to a person: 512B, 1.5KB, 12MB, 3.1GB.
func size(n int64) string {
	switch {
	case n < protocol.KB:
		return strconv.FormatInt(n, 10) + "B"
	case n < protocol.MB:
		return strconv.FormatFloat(float64(n)/float64(protocol.KB), 'f', 1, 64) + "KB"
	case n < protocol.GB:
		return strconv.FormatFloat(float64(n)/float64(protocol.MB), 'f', 1, 64) + "MB"
	}
	return strconv.FormatFloat(float64(n)/float64(protocol.GB), 'f', 1, 64) + "GB"
}
