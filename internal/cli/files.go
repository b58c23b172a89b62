package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/glovebox-dev/glovebox/client"
)

var filesCommand = command{
	name:    "files",
	summary: "files parked on a box: gbx files ls | get ID [-o FILE] | rm ID...",
	run:     runFiles,
}

const filesUsage = `files ls [--json] | get ID [-o FILE] [--consume] | rm ID... [--url URL --key KEY | --box NAME]

The files a box parks for prompts (outputs its localServer storage keeps):
  ls      list them (GET /files): id, size, when it expires, name
  get ID  download one (GET /files/ID), to stdout or -o FILE; --consume deletes it once read
  rm ID   delete them (DELETE /files/ID)
ls and rm need the key, an admin token or a files token without --file ids.`

func runFiles(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var out string
	var consume, asJSON bool
	fs := newFlags(stdio, "files", filesUsage+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVarP(&out, "out", "o", "-", "get: where to write the file (- is stdout)")
	fs.BoolVar(&consume, "consume", false, "get: ask the box to delete the file once read")
	fs.BoolVar(&asJSON, "json", false, "ls: print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	verb := fs.Arg(0)
	switch {
	case verb == "ls" && fs.NArg() == 1:
	case verb == "get" && fs.NArg() == 2:
	case verb == "rm" && fs.NArg() >= 2:
	default:
		return fmt.Errorf("%w: want gbx files ls, gbx files get ID or gbx files rm ID [ID]", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	switch verb {
	case "ls":
		return listFiles(ctx, stdio, b, asJSON)
	case "rm":
		var errs []error
		for _, id := range fs.Args()[1:] {
			if err := b.RemoveFile(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(stdio.Stderr, "removed %s\n", id)
		}
		return errors.Join(errs...)
	}
	var opts []client.ReadOption
	if consume {
		opts = append(opts, client.Consume())
	}
	rc, err := b.File(ctx, fs.Arg(1), opts...)
	if err != nil {
		return err
	}
	defer rc.Close()
	if out == "-" {
		if _, err := io.Copy(stdio.Stdout, rc); err != nil {
			return fmt.Errorf("read file %s: %w", fs.Arg(1), err)
		}
		return nil
	}
	n, err := saveFile(absPath(stdio, out), rc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stderr, "saved %s (%s)\n", out, humanSize(n))
	return nil
}

// listFiles is gbx files ls: the box's parked files, as a table or
// as the box's JSON.
func listFiles(ctx context.Context, stdio IO, b *client.Box, asJSON bool) error {
	l, err := b.Files(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, l)
	}
	if len(l.Files) == 0 {
		fmt.Fprintln(stdio.Stdout, "no files")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSIZE\tEXPIRES\tNAME")
	for _, f := range l.Files {
		exp := "in " + ago(f.Expires.Sub(now))
		if !now.Before(f.Expires) {
			exp = "expired"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.ID, humanSize(f.Size), exp, f.Name)
	}
	return tw.Flush()
}

// saveFile writes r to path through a temporary file, so that a failed
// download leaves no partial file behind.
func saveFile(path string, r io.Reader) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, fmt.Errorf("save %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return 0, fmt.Errorf("save %s: %w", path, err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return n, fmt.Errorf("save %s: %w", path, err)
	}
	return n, nil
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
