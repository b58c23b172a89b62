package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

var procCommand = command{
	name:    "proc",
	summary: "start, list, follow and stop long-running processes in a session",
	run:     runProc,
}

const procUsage = `proc start|ls|logs|kill [--url URL --key KEY | --box NAME] --session ID ...

Long-running processes in a session of the box, outside its prompts (a dev
server, a watcher): they run in the session's sandbox, as its user, in its
work directory with its environment, and end with the session.
(/sessions/{id}/processes: the key, an exec token, or the credential that
opened the session.)

  gbx proc start --session ID [--dir DIR] [--env K=V]... -- COMMAND ARGS...
  gbx proc ls    --session ID [--json]
  gbx proc logs  --session ID [--stderr] [--follow] [--offset N] PID
  gbx proc kill  --session ID [--signal SIGTERM] PID

kill without --signal stops the process (SIGTERM, then SIGKILL after a
grace) and forgets it; with --signal it only sends that signal. logs
prints what the box still holds of a stream (the latest 1 MiB of each) and
says on stderr how many earlier bytes it dropped.`

func runProc(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var session, dir, signal string
	var env []string
	var asJSON, stderr, follow bool
	var offset int64
	fs := newFlags(stdio, "proc", procUsage+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&session, "session", "", "the session (gbx ps lists them)")
	fs.StringVar(&dir, "dir", "", "start: the working directory, relative to the session's work directory")
	fs.StringArrayVar(&env, "env", nil, "start: an environment variable NAME=VALUE (repeatable)")
	fs.BoolVar(&asJSON, "json", false, "ls, start: print the raw JSON")
	fs.BoolVar(&stderr, "stderr", false, "logs: stderr instead of stdout")
	fs.BoolVarP(&follow, "follow", "f", false, "logs: keep printing until the process ends")
	fs.Int64Var(&offset, "offset", 0, "logs: the byte offset in the stream to start at")
	fs.StringVar(&signal, "signal", "", "kill: the signal to send (SIGTERM, SIGINT, SIGHUP, SIGKILL, ...)")
	fs.SetInterspersed(true)
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("%w: proc needs start, ls, logs or kill", ErrUsage)
	}
	if session == "" {
		return fmt.Errorf("%w: proc needs --session ID (gbx ps lists the box's sessions)", ErrUsage)
	}
	sub, rest := rest[0], rest[1:]
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	switch sub {
	case "start":
		return procStart(ctx, stdio, b, session, rest, dir, env, asJSON)
	case "ls":
		return procList(ctx, stdio, b, session, asJSON)
	case "logs":
		if len(rest) != 1 {
			return fmt.Errorf("%w: proc logs takes one process id (gbx proc ls lists them)", ErrUsage)
		}
		return procLogs(ctx, stdio, b, session, rest[0], client.OutputOptions{Stderr: stderr, Follow: follow, Offset: offset})
	case "kill":
		if len(rest) != 1 {
			return fmt.Errorf("%w: proc kill takes one process id (gbx proc ls lists them)", ErrUsage)
		}
		if signal != "" {
			return b.SignalProcess(ctx, session, rest[0], signal)
		}
		return b.DeleteProcess(ctx, session, rest[0])
	}
	return fmt.Errorf("%w: unknown proc command %q: start, ls, logs or kill", ErrUsage, sub)
}

func procStart(ctx context.Context, stdio IO, b *client.Box, session string, command []string, dir string, env []string, asJSON bool) error {
	if len(command) == 0 {
		return fmt.Errorf("%w: proc start needs a command: gbx proc start --session ID -- npm run dev", ErrUsage)
	}
	req := protocol.ProcessRequest{Command: command, Dir: dir}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%w: --env %q: want NAME=VALUE", ErrUsage, kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	p, err := b.StartProcess(ctx, session, req)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, p)
	}
	fmt.Fprintln(stdio.Stdout, p.ID)
	return nil
}

func procList(ctx context.Context, stdio IO, b *client.Box, session string, asJSON bool) error {
	list, err := b.Processes(ctx, session)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdio.Stdout, "no processes")
		return nil
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPID\tSTATE\tEXIT\tSTDOUT\tSTDERR\tCOMMAND")
	for _, p := range list {
		exit := "-"
		if p.Exit != nil {
			exit = fmt.Sprint(p.Exit.Code)
			if p.Exit.Signal != "" {
				exit = p.Exit.Signal
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\n", p.ID, p.Pid, p.State, exit, p.Stdout, p.Stderr, strings.Join(p.Command, " "))
	}
	return tw.Flush()
}

func procLogs(ctx context.Context, stdio IO, b *client.Box, session, id string, o client.OutputOptions) error {
	for {
		got := false
		for page, err := range b.ProcessOutput(ctx, session, id, o) {
			if err != nil {
				return err
			}
			if page.Dropped > 0 {
				fmt.Fprintf(stdio.Stderr, "gbx: %d bytes before offset %d are no longer held by the box\n", page.Dropped, page.Offset)
			}
			if _, err := stdio.Stdout.Write(page.Bytes); err != nil {
				return err
			}
			if page.EOF && page.Exit != nil && o.Follow {
				how := fmt.Sprintf("exit %d", page.Exit.Code)
				if page.Exit.Signal != "" {
					how = "killed by " + page.Exit.Signal
				}
				fmt.Fprintf(stdio.Stderr, "gbx: process %s ended: %s\n", id, how)
			}
			got = len(page.Bytes) > 0
			o.Offset = page.Next
		}
		// Without --follow, page on until the box holds no more.
		if o.Follow || !got {
			return nil
		}
	}
}
