package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/glovebox-dev/glovebox/client"
)

// EndpointsFile is where named endpoints live, under the user's config
// directory ($XDG_CONFIG_HOME, else ~/.config):
//
//	{
//	  "media": {"url": "wss://media.example.com/", "key_env": "MEDIA_KEY"},
//	  "local": {"url": "ws://127.0.0.1:8080/", "key": "..."}
//	}
//
// "key" holds the box key itself; "key_env" names an environment variable
// that holds it, which keeps keys out of the file.
const EndpointsFile = "glovebox/endpoints.json"

// endpointsHelp explains how commands find a box, for their --help.
const endpointsHelp = `
Which box: --url and --key; or --box NAME, looked up in the endpoints file
($XDG_CONFIG_HOME/glovebox/endpoints.json, else ~/.config/glovebox/endpoints.json),
which gbx endpoints add NAME URL --key-env VAR writes:
  {"media": {"url": "wss://media.example.com/", "key_env": "MEDIA_KEY"},
   "local": {"url": "ws://127.0.0.1:8080/", "key": "..."}}
or else $GLOVEBOX_URL and $GLOVEBOX_KEY.`

// boxFlags are the flags every command that talks to a box takes.
type boxFlags struct {
	url, key, box, endpoints string
}

func (f *boxFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "the box's URL (ws://, wss://, http:// or https://); default $GLOVEBOX_URL")
	fs.StringVar(&f.key, "key", "", "the box's key; default $GLOVEBOX_KEY")
	fs.StringVar(&f.box, "box", "", "a named endpoint from the endpoints file")
	fs.StringVar(&f.endpoints, "endpoints", "", "the endpoints file (default $XDG_CONFIG_HOME/"+EndpointsFile+")")
}

// endpoint resolves the flags to one endpoint: --url (with --key or
// $GLOVEBOX_KEY), else --box from the endpoints file, else $GLOVEBOX_URL
// and $GLOVEBOX_KEY.
func (f *boxFlags) endpoint(stdio IO) (client.Endpoint, error) {
	key := f.key
	if key == "" {
		key = stdio.Getenv("GLOVEBOX_KEY")
	}
	switch {
	case f.url != "" && f.box != "":
		return client.Endpoint{}, fmt.Errorf("%w: give --url or --box, not both", ErrUsage)
	case f.url != "":
		if key == "" {
			return client.Endpoint{}, fmt.Errorf("%w: --url needs --key or $GLOVEBOX_KEY", ErrUsage)
		}
		return client.Endpoint{URL: f.url, Key: key}, nil
	case f.box != "":
		return f.named(stdio)
	case stdio.Getenv("GLOVEBOX_URL") != "":
		if key == "" {
			return client.Endpoint{}, fmt.Errorf("%w: $GLOVEBOX_URL is set but $GLOVEBOX_KEY is not (or pass --key)", ErrUsage)
		}
		return client.Endpoint{URL: stdio.Getenv("GLOVEBOX_URL"), Key: key}, nil
	}
	return client.Endpoint{}, fmt.Errorf("%w: which box? pass --url and --key, --box NAME (from %s), or set GLOVEBOX_URL and GLOVEBOX_KEY", ErrUsage, f.endpointsPath(stdio))
}

func (f *boxFlags) endpointsPath(stdio IO) string {
	if f.endpoints != "" {
		return absPath(stdio, f.endpoints)
	}
	dir := stdio.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := stdio.Getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, filepath.FromSlash(EndpointsFile))
}

type endpointEntry struct {
	URL    string `json:"url"`
	Key    string `json:"key,omitempty"`
	KeyEnv string `json:"key_env,omitempty"`
}

func (f *boxFlags) named(stdio IO) (client.Endpoint, error) {
	path := f.endpointsPath(stdio)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return client.Endpoint{}, fmt.Errorf("--box %s: no endpoints file at %s: add the box with gbx endpoints add %s URL --key-env VAR", f.box, path, f.box)
	}
	if err != nil {
		return client.Endpoint{}, fmt.Errorf("read endpoints: %w", err)
	}
	var eps map[string]endpointEntry
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eps); err != nil {
		return client.Endpoint{}, fmt.Errorf("%s: %w (want {\"name\": {\"url\": ..., \"key\" or \"key_env\": ...}})", path, err)
	}
	e, ok := eps[f.box]
	if !ok {
		return client.Endpoint{}, fmt.Errorf("--box %s: not in %s (it has: %s)", f.box, path, strings.Join(slices.Sorted(maps.Keys(eps)), ", "))
	}
	key := f.key
	if key == "" {
		key = e.Key
	}
	if key == "" && e.KeyEnv != "" {
		key = stdio.Getenv(e.KeyEnv)
		if key == "" {
			return client.Endpoint{}, fmt.Errorf("--box %s: its key_env $%s is not set", f.box, e.KeyEnv)
		}
	}
	if key == "" {
		key = stdio.Getenv("GLOVEBOX_KEY")
	}
	if key == "" {
		return client.Endpoint{}, fmt.Errorf("--box %s in %s has no key or key_env", f.box, path)
	}
	return client.Endpoint{URL: e.URL, Key: key}, nil
}

// open returns a client holding one box for the flags, and that box.
func (f *boxFlags) open(stdio IO) (*client.Client, *client.Box, error) {
	ep, err := f.endpoint(stdio)
	if err != nil {
		return nil, nil, err
	}
	name := f.box
	if name == "" {
		name = "box"
	}
	c, err := client.New(map[string]client.Endpoint{name: ep})
	if err != nil {
		return nil, nil, err
	}
	b, err := c.Box(name)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, b, nil
}

// absPath is p taken from the working directory, cleaned.
func absPath(stdio IO, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(stdio.Dir, p)
}

// newFlags returns a flag set that reports errors instead of exiting and
// prints its usage on --help.
func newFlags(stdio IO, name, usage string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // Usage writes to stdio.Stderr itself
	fs.Usage = func() {
		fmt.Fprintf(stdio.Stderr, "Usage: gbx %s\n\nFlags:\n%s", usage, fs.FlagUsages())
	}
	fs.SortFlags = false
	return fs
}

// parseFlags parses args; --help prints the usage and ends the command
// successfully (errHelp), any other error is a usage error.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// errHelp ends a command after --help; run functions turn it into nil.
var errHelp = errors.New("help shown")

func helpOK(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
