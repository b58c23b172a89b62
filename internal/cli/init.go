package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/glovebox-dev/glovebox/generator"
)

var initCommand = command{
	name:    "init",
	summary: "scaffold a box: a commented glovebox.toml with a working exec agent",
	run:     runInit,
}

func runInit(ctx context.Context, stdio IO, args []string) error {
	flags := newFlags(stdio, "init", "init [DIR] [--name NAME] [--agent PRESET] [--force]\n\n"+
		"Creates DIR (default .) with glovebox.toml, README.md and .gitignore.")
	force := flags.Bool("force", false, "overwrite files that already exist")
	agentPreset := flags.String("agent", "", "an ACP agent preset: "+strings.Join(generator.PresetNames(), ", ")+" (default: a shell-command agent)")
	name := flags.String("name", "", "box name (default: the directory's name)")
	if err := parseFlags(flags, args); err != nil {
		return helpOK(err)
	}
	if flags.NArg() > 1 {
		return fmt.Errorf("%w: init takes at most one directory, got %d arguments", ErrUsage, flags.NArg())
	}
	dir := stdio.Dir
	if flags.NArg() == 1 {
		dir = absPath(stdio, flags.Arg(0))
	}
	n := *name
	if n == "" {
		n = filepath.Base(dir)
	}
	files, err := generator.ScaffoldAgent(n, *agentPreset)
	if err != nil {
		return fmt.Errorf("%w: --agent: %v", ErrUsage, err)
	}
	if !*force {
		var exist []string
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, f.Name)); err == nil {
				exist = append(exist, shownPath(stdio.Dir, filepath.Join(dir, f.Name)))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("init: %w", err)
			}
		}
		if len(exist) > 0 {
			return fmt.Errorf("init: %s already exist: nothing written (pass --force to overwrite)", strings.Join(exist, ", "))
		}
	}
	if _, err := generator.Write(dir, files); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	for _, f := range files {
		fmt.Fprintf(stdio.Stdout, "wrote %s\n", shownPath(stdio.Dir, filepath.Join(dir, f.Name)))
	}
	if p, ok := generator.Presets[*agentPreset]; ok {
		fmt.Fprintf(stdio.Stdout, "next: `gbx generate` to lock %s's package and write dist/, then `%s=... gbx dev` to run the box locally\n", p.Name, p.Secret)
		return nil
	}
	fmt.Fprintf(stdio.Stdout, "next: `gbx dev` to run the box locally, `gbx generate` to write dist/\n")
	return nil
}
