package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

var egressCommand = command{
	name:    "egress",
	summary: "a box's egress: its audit trail (egress log|suggest), a live session's own rules (egress show|set --session ID)",
	run:     runEgress,
}

// egressSubcommands are gbx egress's subcommands, by name.
var egressSubcommands = map[string]func(ctx context.Context, stdio IO, args []string) error{
	"set":  runEgressSet,
	"show": runEgressShow,
	"log": func(ctx context.Context, stdio IO, args []string) error {
		return runEgressAudit(ctx, stdio, append([]string{"log"}, args...))
	},
	"suggest": func(ctx context.Context, stdio IO, args []string) error {
		return runEgressAudit(ctx, stdio, append([]string{"suggest"}, args...))
	},
}

const egressHelp = `egress SUBCOMMAND [flags]

Subcommands:
  log [--follow] [--session ID] [--since SEQ|10m|TIME] [--json]
      The box's egress audit trail (GET /egress/log: the key, or an audit or admin
      token): one line a decision, with its rule and glovebox.toml line.
  suggest
      The [network] allow lines the trail suggests (approved and blocked hosts).
  set --session ID [--default allow|deny] [--allow RULE]... [--deny RULE]... [--rules FILE|-] [--clear]
      Replaces a live session's own egress rules (POST /sessions/{id}/egress: the key
      or an admin token). New connections of its agents follow them at once. They
      narrow the box's [network] policy; they widen it only as far as the box's
      session_may_allow, never past a deny rule or a closed address. --default deny
      allows only what --allow names (and the box allows). --rules reads the JSON
      {"default","allow","deny","allow_requests"} (allow_requests: methods and paths).
  show --session ID
      Prints the session's effective policy: the box's, and the session's own rules.
GET /sessions (gbx ps) lists the session ids.`

func runEgress(ctx context.Context, stdio IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stdio.Stderr, "Usage: gbx %s\n", egressHelp)
		if len(args) == 0 {
			return fmt.Errorf("%w: egress needs a subcommand", ErrUsage)
		}
		return nil
	}
	run, ok := egressSubcommands[args[0]]
	if !ok {
		var names []string
		for n := range egressSubcommands {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("%w: egress has no subcommand %q (have: %s)", ErrUsage, args[0], strings.Join(names, ", "))
	}
	return run(ctx, stdio, args[1:])
}

func runEgressSet(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var session, deflt, rulesFile string
	var allow, deny []string
	var clear, asJSON bool
	fs := newFlags(stdio, "egress set", "egress set --session ID [--default allow|deny] [--allow RULE]... [--deny RULE]... [--rules FILE|-] [--clear] [--json]\n\n"+
		"Replaces a live session's own egress rules (see gbx egress --help)."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&session, "session", "", "the session's id (gbx ps lists them)")
	fs.StringVar(&deflt, "default", "", `"deny": only what --allow names; "allow" (or none): what the box allows`)
	fs.StringArrayVar(&allow, "allow", nil, "an allow rule (host, *.domain, address, CIDR, with an optional :port); repeat for more")
	fs.StringArrayVar(&deny, "deny", nil, "a deny rule; repeat for more")
	fs.StringVar(&rulesFile, "rules", "", `a JSON file ("-": stdin) of {"default","allow","deny","allow_requests"}`)
	fs.BoolVar(&clear, "clear", false, "remove the session's own rules")
	fs.BoolVar(&asJSON, "json", false, "print the session's effective policy as JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: egress set takes flags only, got %q", ErrUsage, fs.Args())
	}
	if session == "" {
		return fmt.Errorf("%w: egress set needs --session ID (gbx ps lists the sessions)", ErrUsage)
	}
	var spec protocol.NetworkSpec
	given := deflt != "" || len(allow) > 0 || len(deny) > 0
	switch {
	case clear && (given || rulesFile != ""):
		return fmt.Errorf("%w: --clear takes no rules", ErrUsage)
	case rulesFile != "" && given:
		return fmt.Errorf("%w: give the rules in --rules or in flags, not both", ErrUsage)
	case !clear && !given && rulesFile == "":
		return fmt.Errorf("%w: egress set needs rules (--default, --allow, --deny or --rules) or --clear", ErrUsage)
	case rulesFile != "":
		var data []byte
		var err error
		if rulesFile == "-" {
			data, err = readAllLimited(stdio)
		} else {
			data, err = os.ReadFile(rulesFile)
		}
		if err != nil {
			return fmt.Errorf("read the rules %s: %w", rulesFile, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return fmt.Errorf(`the rules in %s are not {"default", "allow", "deny", "allow_requests"}: %w`, rulesFile, err)
		}
	default:
		spec = protocol.NetworkSpec{Default: deflt, Allow: allow, Deny: deny}
	}
	if err := spec.CheckSession(); err != nil {
		return fmt.Errorf("%w: the session's rules: %v", ErrUsage, err)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := b.SessionEgress(ctx, session, &spec)
	if err != nil {
		return err
	}
	return printEgress(stdio, v, asJSON)
}

func runEgressShow(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var session string
	var asJSON bool
	fs := newFlags(stdio, "egress show", "egress show --session ID [--json]\n\nPrints a live session's effective egress policy."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&session, "session", "", "the session's id (gbx ps lists them)")
	fs.BoolVar(&asJSON, "json", false, "print it as JSON")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if session == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: egress show takes --session ID only", ErrUsage)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := b.SessionEgress(ctx, session, nil)
	if err != nil {
		return err
	}
	return printEgress(stdio, v, asJSON)
}

func readAllLimited(stdio IO) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(stdio.Stdin, 1<<20+1))
	if err == nil && len(data) > 1<<20 {
		err = errors.New("more than 1MB")
	}
	return data, err
}

func printEgress(stdio IO, v *protocol.EgressEnvironment, asJSON bool) error {
	if asJSON {
		return printJSON(stdio.Stdout, v)
	}
	w := stdio.Stdout
	fmt.Fprintf(w, "box:      default %s, allow %s, deny %s\n", v.Default, ruleList(v.Allow), ruleList(v.Deny))
	for _, r := range v.AllowRequests {
		fmt.Fprintf(w, "          allow %s\n", r)
	}
	if len(v.SessionMayAllow) > 0 {
		fmt.Fprintf(w, "          sessions may allow %s\n", ruleList(v.SessionMayAllow))
	}
	if s := v.Session; s != nil {
		d := s.Default
		if d == "" {
			d = "allow (what the box allows)"
		}
		fmt.Fprintf(w, "session:  default %s, allow %s, deny %s\n", d, ruleList(s.Allow), ruleList(s.Deny))
		for _, r := range s.AllowRequests {
			fmt.Fprintf(w, "          allow %s\n", r)
		}
	} else {
		fmt.Fprintln(w, "session:  no rules of its own")
	}
	return nil
}

func ruleList(vs []string) string {
	if len(vs) == 0 {
		return "[]"
	}
	return "[" + strings.Join(vs, ", ") + "]"
}
