// Package cli implements gbx, the Glovebox command line. cmd/gbx is a thin
// main that calls Run; every command lives in its own file here and is
// listed in commands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/glovebox-dev/glovebox/internal/version"
)

// IO is what a command may touch of the outside world. Tests fill it with
// buffers and a fake environment; main fills it from the process.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment.
	Getenv func(string) string
	// Dir is the working directory relative paths are taken from.
	Dir string
}

// command is one gbx subcommand.
type command struct {
	name    string
	summary string // one line for `gbx help`
	// run parses its own flags from args (which exclude the command name)
	// and does the work.
	run func(ctx context.Context, io IO, args []string) error
}

// commands lists every subcommand. Each is defined in its own file.
var commands = []command{
	initCommand,
	generateCommand,
	buildCommand,
	promptCommand,
	envCommand,
	sbomCommand,
	healthCommand,
	filesCommand,
	tokenCommand,
	devCommand,
	demoCommand,
	psCommand,
	fsCommand,
	previewCommand,
	shellCommand,
	procCommand,
	snapshotCommand,
	snapshotsCommand,
	restoreCommand,
	forkCommand,
	logsCommand,
	egressCommand,
	runsCommand,
	endpointsCommand,
	versionCommand,
}

// ErrUsage marks an error caused by how gbx was called; Run returns 2 on it.
var ErrUsage = errors.New("usage")

// ExitError asks Run to return Code after printing nothing more. A
// command returns it when it already reported the failure itself.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Run runs gbx with args (without the program name) and returns the status
// the process exits with: 0; a command's own status (gbx prompt passes on
// the remote command's); 2 for a usage error; 1 for any other failure,
// which it prints to stdio.Stderr. cmd/gbx's main is os.Exit(cli.Run(...)).
func Run(ctx context.Context, stdio IO, args []string) int {
	err := execute(ctx, stdio, args)
	var exit *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(stdio.Stderr, "gbx:", err)
		return 2
	default:
		fmt.Fprintln(stdio.Stderr, "gbx:", err)
		return 1
	}
}

// execute is Run up to the exit status: the command's error.
func execute(ctx context.Context, stdio IO, args []string) error {
	if stdio.Getenv == nil {
		stdio.Getenv = os.Getenv
	}
	if stdio.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		stdio.Dir = wd
	}
	if len(args) == 0 {
		usage(stdio.Stderr)
		return fmt.Errorf("%w: no command given", ErrUsage)
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := lookup(args[1]); ok {
				return c.run(ctx, stdio, []string{"--help"})
			}
		}
		usage(stdio.Stdout)
		return nil
	}
	if args[0] == "--version" {
		args[0] = "version"
	}
	c, ok := lookup(args[0])
	if !ok {
		usage(stdio.Stderr)
		return fmt.Errorf("%w: unknown command %q", ErrUsage, args[0])
	}
	return c.run(ctx, stdio, args[1:])
}

// Version is stamped at build time with -ldflags "-X ...cli.Version=v1.2.3".
// Unstamped, gbx version reports what Go recorded in the binary.
var Version = "dev"

var versionCommand = command{
	name:    "version",
	summary: "print gbx's version",
	run: func(ctx context.Context, stdio IO, args []string) error {
		fs := newFlags(stdio, "version", "version\n\nPrints gbx's version: the stamped release, else the module version and VCS\nrevision Go recorded when it built gbx.")
		if err := parseFlags(fs, args); err != nil {
			return helpOK(err)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: version takes no arguments", ErrUsage)
		}
		fmt.Fprintf(stdio.Stdout, "gbx %s\n", version.String(Version))
		return nil
	},
}

// aliases are other names of commands.
var aliases = map[string]string{"sessions": "ps"}

func lookup(name string) (command, bool) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	var b strings.Builder
	b.WriteString("gbx: run AI agents as isolated, network-addressable boxes\n\nUsage:\n  gbx <command> [flags] [args]\n\nCommands:\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'gbx <command> --help' for a command's flags.\n")
	io.WriteString(w, b.String())
}
