package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/glovebox-dev/glovebox/client"
)

var endpointsCommand = command{
	name:    "endpoints",
	summary: "name boxes for --box: gbx endpoints add NAME URL | ls | rm NAME",
	run:     runEndpoints,
}

const endpointsUsage = `endpoints add NAME URL [--key-env VAR | --key KEY] [--force] | ls | rm NAME... [--endpoints FILE]

Keeps named boxes in the endpoints file, so that other commands take --box NAME
instead of --url and --key:
  add NAME URL  name the box at URL; its key comes from $VAR (--key-env, the
                default is $GLOVEBOX_KEY when neither is given) or is stored in
                the file itself (--key; the file is written with mode 0600)
  ls            list the names, URLs and where each key comes from (never the key)
  rm NAME       forget names
The file is $XDG_CONFIG_HOME/` + EndpointsFile + `, else ~/.config/` + EndpointsFile + `.`

// endpointNameRE is what a name may be: it is typed on command lines.
var endpointNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

var envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func runEndpoints(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var key, keyEnv string
	var force bool
	flags := newFlags(stdio, "endpoints", endpointsUsage)
	flags.StringVar(&bf.endpoints, "endpoints", "", "the endpoints file (default $XDG_CONFIG_HOME/"+EndpointsFile+")")
	flags.StringVar(&keyEnv, "key-env", "", "add: the environment variable that holds the box's key")
	flags.StringVar(&key, "key", "", "add: store the key itself in the file")
	flags.BoolVar(&force, "force", false, "add: replace an endpoint of the same name")
	if err := parseFlags(flags, args); err != nil {
		return helpOK(err)
	}
	path := bf.endpointsPath(stdio)
	verb := flags.Arg(0)
	switch {
	case verb == "add" && flags.NArg() == 3:
	case verb == "ls" && flags.NArg() == 1:
	case verb == "rm" && flags.NArg() >= 2:
	default:
		return fmt.Errorf("%w: want gbx endpoints add NAME URL, gbx endpoints ls or gbx endpoints rm NAME [NAME]", ErrUsage)
	}
	eps, err := readEndpoints(path)
	if err != nil {
		return err
	}
	switch verb {
	case "ls":
		return printEndpoints(stdio, path, eps)
	case "rm":
		for _, name := range flags.Args()[1:] {
			if _, ok := eps[name]; !ok {
				return fmt.Errorf("endpoint %q is not in %s (it has: %s)", name, path, strings.Join(slices.Sorted(maps.Keys(eps)), ", "))
			}
			delete(eps, name)
		}
		if err := writeEndpoints(path, eps); err != nil {
			return err
		}
		fmt.Fprintf(stdio.Stderr, "removed %s from %s\n", strings.Join(flags.Args()[1:], ", "), path)
		return nil
	}
	name, url := flags.Arg(1), flags.Arg(2)
	if !endpointNameRE.MatchString(name) {
		return fmt.Errorf("%w: endpoint name %q: use letters, digits, '.', '_' and '-' (at most 64)", ErrUsage, name)
	}
	if key != "" && keyEnv != "" {
		return fmt.Errorf("%w: give --key or --key-env, not both", ErrUsage)
	}
	if keyEnv != "" && !envVarRE.MatchString(keyEnv) {
		return fmt.Errorf("%w: --key-env %q is not an environment variable name", ErrUsage, keyEnv)
	}
	// The client checks the URL as it will use it.
	c, err := client.New(map[string]client.Endpoint{name: {URL: url, Key: "-"}})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	c.Close()
	if _, ok := eps[name]; ok && !force {
		return fmt.Errorf("endpoint %q is already in %s: pass --force to replace it", name, path)
	}
	eps[name] = endpointEntry{URL: url, Key: key, KeyEnv: keyEnv}
	if err := writeEndpoints(path, eps); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stderr, "added %s (%s) to %s\n", name, url, path)
	if key == "" && keyEnv == "" {
		fmt.Fprintf(stdio.Stderr, "its key comes from $GLOVEBOX_KEY; pass --key-env VAR to name another variable\n")
	}
	return nil
}

// printEndpoints is gbx endpoints ls: each endpoint's name, URL and
// where its key comes from.
func printEndpoints(stdio IO, path string, eps map[string]endpointEntry) error {
	if len(eps) == 0 {
		fmt.Fprintf(stdio.Stdout, "no endpoints in %s: add one with gbx endpoints add NAME URL\n", path)
		return nil
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tURL\tKEY")
	for _, name := range slices.Sorted(maps.Keys(eps)) {
		e := eps[name]
		where := "$GLOVEBOX_KEY"
		switch {
		case e.Key != "":
			where = "in the file"
		case e.KeyEnv != "":
			where = "$" + e.KeyEnv
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, e.URL, where)
	}
	return tw.Flush()
}

// readEndpoints reads the endpoints file; a missing file holds none.
func readEndpoints(path string) (map[string]endpointEntry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]endpointEntry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
	}
	eps := map[string]endpointEntry{}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eps); err != nil {
		return nil, fmt.Errorf("%s: %w (want {\"name\": {\"url\": ..., \"key\" or \"key_env\": ...}}; fix or remove it)", path, err)
	}
	return eps, nil
}

// writeEndpoints replaces the endpoints file (mode 0600: it may hold keys)
// through a temporary file.
func writeEndpoints(path string, eps map[string]endpointEntry) error {
	data, err := json.MarshalIndent(eps, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write endpoints: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".endpoints-*")
	if err != nil {
		return fmt.Errorf("write endpoints: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write endpoints %s: %w", path, err)
	}
	return nil
}
