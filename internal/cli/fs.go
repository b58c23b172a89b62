package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

var fsCommand = command{
	name:    "fs",
	summary: "a live session's files: fs ls|stat|get|put|rm|mkdir|mv|watch --session ID",
	run:     runFS,
}

const fsHelp = `fs SUBCOMMAND --session ID [flags] PATH...

A live session's files (/sessions/{id}/fs: the key, a workspace or admin token,
or the credential that opened the session), read and written as the session.
PATH is as the session knows it: work/..., input/... or output/... (gbx fs ls
with no PATH lists the ones the box has). gbx ps lists the sessions.

Subcommands:
  ls [PATH] [--json]            a directory's entries, every page of them
  stat PATH [--json]            one entry; a symbolic link is shown, not followed
  get PATH [DEST|-]             a file, to DEST (default: its name, here) or stdout;
                                --offset N and --length N read a part
  put SRC|- PATH [--append] [--parents]
                                a local file (or stdin) streamed to PATH, replacing it
                                whole once all has arrived (--append: added to its end)
  rm PATH [-r]                  a file, a link or an empty directory; -r a whole tree
  mkdir PATH [-p]               a directory; -p with its parents, no error if it exists
  mv FROM TO                    a rename, within the session's directories
  watch [PATH] [--json]         what is created, written, removed and renamed beneath
                                the directory (default work), until interrupted`

// fsSubcommands are gbx fs's subcommands, by name.
var fsSubcommands = map[string]func(ctx context.Context, stdio IO, f *fsFlags) error{
	"ls":    runFSLs,
	"stat":  runFSStat,
	"get":   runFSGet,
	"put":   runFSPut,
	"rm":    runFSRm,
	"mkdir": runFSMkdir,
	"mv":    runFSMv,
	"watch": runFSWatch,
}

// fsFlags are the flags of every gbx fs subcommand.
type fsFlags struct {
	bf                        boxFlags
	session                   string
	asJSON, appendTo, parents bool
	recursive                 bool
	offset, length            int64
	fs                        *pflag.FlagSet
	files                     *client.FS
}

func runFS(ctx context.Context, stdio IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stdio.Stderr, "Usage: gbx %s\n%s\n", fsHelp, endpointsHelp)
		if len(args) == 0 {
			return fmt.Errorf("%w: fs needs a subcommand", ErrUsage)
		}
		return nil
	}
	run, ok := fsSubcommands[args[0]]
	if !ok {
		var names []string
		for n := range fsSubcommands {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("%w: fs has no subcommand %q (have: %s)", ErrUsage, args[0], strings.Join(names, ", "))
	}
	var f fsFlags
	f.fs = newFlags(stdio, "fs "+args[0], fsHelp+"\n"+endpointsHelp)
	f.bf.register(f.fs)
	f.fs.StringVar(&f.session, "session", "", "the session's id (gbx ps lists them)")
	switch args[0] {
	case "ls", "stat", "watch":
		f.fs.BoolVar(&f.asJSON, "json", false, "print JSON (a line an entry or event)")
	case "get":
		f.fs.Int64Var(&f.offset, "offset", 0, "read from this byte")
		f.fs.Int64Var(&f.length, "length", -1, "read at most this many bytes (-1: to the end)")
	case "put":
		f.fs.BoolVar(&f.appendTo, "append", false, "add to the end of the file instead of replacing it")
		f.fs.BoolVar(&f.parents, "parents", false, "make missing directories on the way")
	case "rm":
		f.fs.BoolVarP(&f.recursive, "recursive", "r", false, "remove a directory and all it holds")
	case "mkdir":
		f.fs.BoolVarP(&f.parents, "parents", "p", false, "make missing parents; no error if it exists")
	}
	if err := parseFlags(f.fs, args[1:]); err != nil {
		return helpOK(err)
	}
	if f.session == "" {
		return fmt.Errorf("%w: fs %s needs --session ID (gbx ps lists the sessions)", ErrUsage, args[0])
	}
	for _, a := range f.fs.Args() {
		if a == "" {
			return fmt.Errorf("%w: an empty path", ErrUsage)
		}
	}
	c, b, err := f.bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	f.files = b.FS(f.session)
	return run(ctx, stdio, &f)
}

// args checks the count of positional arguments.
func (f *fsFlags) args(name string, lo, hi int) ([]string, error) {
	a := f.fs.Args()
	if len(a) < lo || len(a) > hi {
		return nil, fmt.Errorf("%w: fs %s: %d arguments, want %s (gbx fs --help)", ErrUsage, name, len(a), map[bool]string{true: fmt.Sprint(lo), false: fmt.Sprintf("%d to %d", lo, hi)}[lo == hi])
	}
	return a, nil
}

func runFSLs(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("ls", 0, 1)
	if err != nil {
		return err
	}
	p := ""
	if len(a) == 1 {
		p = a[0]
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	enc := json.NewEncoder(stdio.Stdout)
	for e, err := range f.files.ListAll(ctx, p) {
		if err != nil {
			tw.Flush()
			return err
		}
		if f.asJSON {
			if err := enc.Encode(e); err != nil {
				return err
			}
			continue
		}
		printEntry(tw, e)
	}
	return tw.Flush()
}

// printEntry prints an entry as ls -l would, more or less.
func printEntry(w io.Writer, e protocol.FSEntry) {
	kind := map[string]string{protocol.FSDir: "d", protocol.FSSymlink: "l", protocol.FSFile: "-"}[e.Type]
	if kind == "" {
		kind = "?"
	}
	mtime := e.MTime
	if t, err := time.Parse(time.RFC3339Nano, e.MTime); err == nil {
		mtime = t.Local().Format("2006-01-02 15:04")
	}
	name := e.Name
	if e.Type == protocol.FSDir {
		name += "/"
	}
	if e.Target != "" {
		name += " -> " + e.Target
	}
	fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\n", kind, os.FileMode(e.Mode).Perm(), protocol.FormatSize(e.Size), mtime, name)
}

func runFSStat(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("stat", 1, 1)
	if err != nil {
		return err
	}
	e, err := f.files.Stat(ctx, a[0])
	if err != nil {
		return err
	}
	if f.asJSON {
		return printJSON(stdio.Stdout, e)
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	printEntry(tw, *e)
	return tw.Flush()
}

func runFSGet(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("get", 1, 2)
	if err != nil {
		return err
	}
	dest := filepath.Base(a[0])
	if len(a) == 2 {
		dest = a[1]
	}
	rc, err := f.files.Open(ctx, a[0], f.offset, f.length)
	if err != nil {
		return err
	}
	defer rc.Close()
	if dest == "-" {
		_, err := io.Copy(stdio.Stdout, rc)
		return err
	}
	dest = absPath(stdio, dest)
	if st, err := os.Stat(dest); err == nil && st.IsDir() {
		dest = filepath.Join(dest, filepath.Base(a[0]))
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("get %s: %w", a[0], err)
	}
	n, err := io.Copy(tmp, rc)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("get %s to %s: %w", a[0], dest, err)
	}
	fmt.Fprintf(stdio.Stderr, "%s -> %s (%s)\n", a[0], dest, protocol.FormatSize(n))
	return nil
}

func runFSPut(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("put", 2, 2)
	if err != nil {
		return err
	}
	src, to := a[0], a[1]
	var r io.Reader = stdio.Stdin
	size := int64(-1)
	if src != "-" {
		file, err := os.Open(absPath(stdio, src))
		if err != nil {
			return fmt.Errorf("put: %w", err)
		}
		defer file.Close()
		st, err := file.Stat()
		if err != nil {
			return fmt.Errorf("put: %w", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("put %s: not a regular file", src)
		}
		r, size = file, st.Size()
	}
	e, err := f.files.Write(ctx, to, r, client.WriteOptions{Size: size, Append: f.appendTo, Parents: f.parents})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stderr, "%s -> %s (%s)\n", src, e.Path, protocol.FormatSize(e.Size))
	return nil
}

func runFSRm(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("rm", 1, 1)
	if err != nil {
		return err
	}
	return f.files.Remove(ctx, a[0], f.recursive)
}

func runFSMkdir(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("mkdir", 1, 1)
	if err != nil {
		return err
	}
	_, err = f.files.Mkdir(ctx, a[0], f.parents)
	return err
}

func runFSMv(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("mv", 2, 2)
	if err != nil {
		return err
	}
	_, err = f.files.Move(ctx, a[0], a[1])
	return err
}

func runFSWatch(ctx context.Context, stdio IO, f *fsFlags) error {
	a, err := f.args("watch", 0, 1)
	if err != nil {
		return err
	}
	p := protocol.FSRootWork
	if len(a) == 1 {
		p = a[0]
	}
	events, err := f.files.Watch(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stderr, "watching %s (interrupt to stop)\n", p)
	enc := json.NewEncoder(stdio.Stdout)
	for ev, err := range events {
		if err != nil {
			return err
		}
		if f.asJSON {
			if err := enc.Encode(ev); err != nil {
				return err
			}
			continue
		}
		switch {
		case ev.Type == protocol.FSEventRename:
			fmt.Fprintf(stdio.Stdout, "rename %s -> %s\n", ev.From, ev.Path)
		case ev.Type == protocol.FSEventLost:
			fmt.Fprintf(stdio.Stdout, "lost %s: %s\n", ev.Path, ev.Message)
		default:
			fmt.Fprintf(stdio.Stdout, "%s %s\n", ev.Type, ev.Path)
		}
	}
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.Canceled) {
		return context.Cause(ctx)
	}
	return nil
}
