package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

var envCommand = command{
	name:    "env",
	summary: "show a box's environment: base, directories, packages, limits, capabilities",
	run:     runEnv,
}

func runEnv(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON bool
	fs := newFlags(stdio, "env", "env [--url URL --key KEY | --box NAME] [--json]"+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: env takes no arguments", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	env, err := b.Environment(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, env)
	}
	fmt.Fprint(stdio.Stdout, formatEnv(env))
	return nil
}

func formatEnv(env *protocol.Environment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", env.Name, env.Version)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "  %-13s %s\n", k, v)
		}
	}
	row("base", env.Base)
	row("agent", env.Agent)
	row("protocol", fmt.Sprintf("v%d", env.ProtocolVersion))
	row("capabilities", strings.Join(env.Capabilities, ", "))
	for _, k := range slices.Sorted(maps.Keys(env.FS)) {
		m := env.FS[k]
		mode := "read-only"
		if m.Writable {
			mode = "writable"
		}
		row("fs."+k, m.Path+" ("+mode+")")
	}
	p := env.Packages
	row("nix", strings.Join(p.Nix, " "))
	row("pip", strings.Join(p.Pip, " "))
	row("npm", strings.Join(p.Npm, " "))
	row("apt", strings.Join(p.Apt, " "))
	if l := env.Limits; l != nil {
		row("timeout", l.Timeout)
		row("cpu", l.CPU)
		row("memory", l.Memory)
		row("max_message", l.MaxMessage)
		row("max_input", l.MaxInput)
	}
	if p := env.Provenance; p != nil {
		row("config", p.ConfigSHA256)
		row("gbx", p.Gbx)
		if in, ok := p.Inputs["nixpkgs"]; ok {
			row("nixpkgs", in.Rev)
		}
		if p.ClosureSHA256 != "" {
			row("closure", fmt.Sprintf("%s (%d store paths)", p.ClosureSHA256, p.ClosurePaths))
		}
	}
	return b.String()
}

var healthCommand = command{
	name:    "health",
	summary: "check that a box is up (GET /health; needs no key)",
	run:     runHealth,
}

func runHealth(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var asJSON bool
	fs := newFlags(stdio, "health", "health [--url URL | --box NAME] [--json]"+"\n"+endpointsHelp)
	bf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print the raw JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: health takes no arguments", ErrUsage)
	}
	if bf.key == "" && stdio.Getenv("GLOVEBOX_KEY") == "" {
		bf.key = "-" // /health needs no key; the client wants one
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	h, err := b.Health(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdio.Stdout).Encode(h)
	}
	if !h.OK {
		fmt.Fprintf(stdio.Stdout, "%s %s: not ok\n", h.Name, h.Version)
		return &ExitError{Code: 1}
	}
	fmt.Fprintf(stdio.Stdout, "%s %s: ok\n", h.Name, h.Version)
	return nil
}

// printJSON writes v as indented JSON, what every --json flag prints.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
