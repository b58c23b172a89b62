package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glovebox-dev/glovebox/client"
)

var filesCommand = command{
	name:    "files",
	summary: "fetch a file a box stored for a prompt: gbx files get ID [-o FILE]",
	run:     runFiles,
}

func runFiles(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var out string
	var consume bool
	fs := newFlags(stdio, "files", "files get ID [-o FILE] [--consume] [--url URL --key KEY | --box NAME]"+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVarP(&out, "out", "o", "-", "where to write the file (- is stdout)")
	fs.BoolVar(&consume, "consume", false, "ask the box to delete the file once read")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() != 2 || fs.Arg(0) != "get" {
		return fmt.Errorf("%w: want gbx files get ID", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
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
