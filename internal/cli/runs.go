package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

var runsCommand = command{
	name:    "runs",
	summary: "the signed records of the prompts a box ran: get them, verify them",
	run:     runRuns,
}

const runsUsage = `runs get PROMPT | get --session ID | verify FILE | verify PROMPT | verify --session ID
     [--manifest glovebox.json | --public-key KEY] [--url URL --key KEY | --box NAME]

A box signs a record of every prompt it runs (the box, session and prompt, the
digests of the prompt, its inputs and outputs, its egress decisions, the limits
it hit, its outcome and times), chained to the session's previous record.
  get PROMPT      print a prompt's record as the box serves it (GET /runs/PROMPT)
  get --session   print a session's chain of records (GET /runs?session=ID)
  verify FILE     check a record or a chain saved by get (- reads stdin; an
                  argument that names a file or ends in .json is one)
  verify PROMPT   fetch a prompt's record and check it
  verify --session ID  fetch a session's chain and check every record and link
Records are checked with the run record key of the box's manifest
(--manifest, its runs.public_key; or --public-key), else with the key the
box's /environment reports. A record whose bytes were changed fails and the
fields changed are named; a chain with a record missing or out of place fails
at that record. Reading records needs the key, a runs or admin token, or the
credential that opened the session.`

func runRuns(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var session, manifest, pubKey string
	fs := newFlags(stdio, "runs", runsUsage+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&session, "session", "", "the session whose chain of records to read")
	fs.StringVar(&manifest, "manifest", "", "the box's glovebox.json, whose runs.public_key checks the records")
	fs.StringVar(&pubKey, "public-key", "", "the box's run record key (runs.public_key of its manifest)")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	verb, n := fs.Arg(0), fs.NArg()
	if verb != "get" && verb != "verify" || n > 2 || (n == 2) == (session != "") {
		return fmt.Errorf("%w: want gbx runs get PROMPT, gbx runs get --session ID, gbx runs verify FILE|PROMPT or gbx runs verify --session ID", ErrUsage)
	}
	if manifest != "" && pubKey != "" {
		return fmt.Errorf("%w: give --manifest or --public-key, not both", ErrUsage)
	}
	if manifest != "" {
		k, err := manifestRunsKey(absPath(stdio, manifest))
		if err != nil {
			return err
		}
		pubKey = k
	}
	arg := fs.Arg(1)
	if verb == "verify" && n == 2 && (arg == "-" || strings.HasSuffix(arg, ".json") || fileExists(absPath(stdio, arg))) {
		return verifyRunFile(stdio, arg, pubKey)
	}
	c, b, err := bf.open(stdio)
	if err != nil {
		return err
	}
	defer c.Close()
	o := client.RunOptions{Session: session, PublicKey: pubKey}
	if session != "" {
		recs, err := b.RunChain(ctx, o)
		if verb == "get" && recs != nil {
			writeJSON(stdio.Stdout, protocol.RunChain{Session: session, Records: recs})
		}
		return reportRuns(stdio, verb, recs, err)
	}
	_, s, err := b.Run(ctx, arg, o)
	if verb == "get" && s != nil {
		writeJSON(stdio.Stdout, s)
	}
	if s == nil {
		return err
	}
	return reportRuns(stdio, verb, []protocol.SignedRun{*s}, err)
}

// verifyRunFile checks a record or a chain saved by gbx runs get.
func verifyRunFile(stdio IO, name, pubKey string) error {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(io.LimitReader(stdio.Stdin, 64<<20))
	} else {
		data, err = os.ReadFile(absPath(stdio, name))
	}
	if err != nil {
		return fmt.Errorf("read run records: %w", err)
	}
	if pubKey == "" {
		return fmt.Errorf("%w: verify FILE needs the box's key: --manifest glovebox.json or --public-key", ErrUsage)
	}
	pub, err := protocol.ParseRunPublicKey(pubKey)
	if err != nil {
		return err
	}
	var probe struct {
		Records []protocol.SignedRun `json:"records"`
	}
	if json.Unmarshal(data, &probe) == nil && probe.Records != nil {
		return reportRuns(stdio, "verify", probe.Records, protocol.VerifyRunChain(pub, probe.Records))
	}
	s, err := protocol.DecodeSignedRun(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return reportRuns(stdio, "verify", []protocol.SignedRun{*s}, s.Verify(pub))
}

// reportRuns says what verification found: one line on stderr for get,
// on stdout for verify.
func reportRuns(stdio IO, verb string, recs []protocol.SignedRun, err error) error {
	if err != nil {
		return fmt.Errorf("not verified: %w", err)
	}
	if len(recs) == 0 {
		return errors.New("not verified: no records")
	}
	out := stdio.Stdout
	if verb == "get" {
		out = stdio.Stderr
	}
	switch first, _ := recs[0].Run(); {
	case len(recs) == 1:
		fmt.Fprintf(out, "verified: record %d of session %s (prompt %q, %s), signed by %s\n", first.Seq, first.Session, first.Prompt, first.Outcome, recs[0].PublicKey)
	default:
		fmt.Fprintf(out, "verified: %d records of session %s, every link of the chain in place, signed by %s\n", len(recs), first.Session, recs[0].PublicKey)
	}
	return nil
}

// manifestRunsKey reads runs.public_key from a manifest.
func manifestRunsKey(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read manifest: %w", err)
	}
	m, err := protocol.ParseManifest(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if m.Runs == nil || m.Runs.PublicKey == "" {
		return "", fmt.Errorf("%s has no runs.public_key: regenerate it with gbx generate", path)
	}
	return m.Runs.PublicKey, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	w.Write(append(b, '\n'))
}
