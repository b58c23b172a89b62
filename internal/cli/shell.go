package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/glovebox-dev/glovebox/protocol"
)

var shellCommand = command{
	name:    "shell",
	summary: "open a terminal in a session of a box",
	run:     runShell,
}

const shellUsage = `shell [--url URL --key KEY | --box NAME] [--session ID] [-- COMMAND ARGS...]

Opens a terminal in a session of the box (POST /sessions/{id}/terminals;
the key, an exec token, or the credential that opened the session) and
attaches this terminal to it: raw mode, resized with this window, until the
command ends. gbx exits with the command's status.

The command runs in the session's sandbox, as the session's user, in its
work directory, with its environment; by default the session's shell.
Without --session, gbx opens a new session and keeps it open while the
shell runs: what the shell leaves running ends with it.`

func runShell(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var session string
	fs := newFlags(stdio, "shell", shellUsage+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&session, "session", "", "the session to open the terminal in (gbx ps lists them); default a new one")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	if session == "" {
		if session, err = b.Connect(ctx); err != nil {
			return err
		}
	}
	req := protocol.TerminalRequest{Command: fs.Args()}
	in, _ := stdio.Stdin.(*os.File)
	out, _ := stdio.Stdout.(*os.File)
	tty := in != nil && isTerminal(in)
	if tty {
		cols, rows := termSize(in)
		req.Cols, req.Rows = cols, rows
		if t := stdio.Getenv("TERM"); t != "" {
			req.Env = map[string]string{"TERM": t}
		}
	}
	term, err := b.StartTerminal(ctx, session, req)
	if err != nil {
		return err
	}
	defer term.Close()
	if tty {
		restore, err := makeRaw(in)
		if err != nil {
			return fmt.Errorf("put this terminal in raw mode: %w", err)
		}
		defer restore()
		winch := make(chan os.Signal, 1)
		notifyResize(winch)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				cols, rows := termSize(in)
				if cols > 0 && rows > 0 {
					_ = term.Resize(cols, rows)
				}
			}
		}()
	}
	// Input goes on until this process ends: a read of stdin cannot be
	// interrupted.
	go func() {
		_, _ = io.Copy(term, stdio.Stdin)
	}()
	var w io.Writer = stdio.Stdout
	if out != nil {
		w = out
	}
	_, _ = io.Copy(w, term)
	exit, err := term.Wait(ctx)
	if err != nil {
		return err
	}
	if exit.Code != 0 {
		if tty {
			// Raw mode is restored by the deferred call before gbx exits.
			defer fmt.Fprintf(stdio.Stderr, "\r\n")
		}
		return &ExitError{Code: exit.Code}
	}
	return nil
}
