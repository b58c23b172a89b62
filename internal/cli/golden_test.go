package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// update rewrites the golden files and the CLI reference instead of
// comparing against them: go test ./internal/cli -run 'Golden|Reference' -update
var update = flag.Bool("update", false, "rewrite testdata/golden and docs/cli.md from what gbx prints now")

// normaliser replaces what differs between runs (temp paths, URLs, keys,
// ids, tokens, times, durations) with stable placeholders.
type normaliser struct {
	literal []string // pairs: old, new
	// extra are the case's own rules, applied after the common ones.
	extra []rule
	// columns collapses the padding between a table's columns, for
	// tables whose column widths follow a normalised value (a port, a
	// duration).
	columns bool
}

type rule struct {
	re   *regexp.Regexp
	with string
}

func (n *normaliser) add(old, placeholder string) {
	if old != "" {
		n.literal = append(n.literal, old, placeholder)
	}
}

var volatile = []rule{
	{regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/[A-Za-z-]+\d+(/\d{3})?`), "<TMP>"},
	{regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<UUID>"},
	{regexp.MustCompile(`gbt1\.[A-Za-z0-9_.-]+`), "<TOKEN>"},
	{regexp.MustCompile(`\b[0-9a-f]{8}\.\.\.[0-9a-f]{4}\b`), "<FINGERPRINT>"},
	{regexp.MustCompile(`\b[0-9a-f]{32}\b`), "<ID>"},
	{regexp.MustCompile(`\b[0-9a-f]{64}\b`), "<HASH>"},
	{regexp.MustCompile(`\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?`), "<TIME>"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d(\.\d+)?\b`), "<TIME>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "<ADDR>"},
	{regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|ms|h|m|s))+\b( ago)?`), "<DURATION>"},
	{regexp.MustCompile(`duration_ms=\d+`), "duration_ms=<N>"},
}

func (n *normaliser) apply(s string) string {
	// Longest literal first, so a temp dir's subdirectory is not half-replaced.
	lits := make([][2]string, 0, len(n.literal)/2)
	for i := 0; i+1 < len(n.literal); i += 2 {
		lits = append(lits, [2]string{n.literal[i], n.literal[i+1]})
	}
	sort.SliceStable(lits, func(i, j int) bool { return len(lits[i][0]) > len(lits[j][0]) })
	for _, l := range lits {
		s = strings.ReplaceAll(s, l[0], l[1])
	}
	for _, v := range append(volatile[:len(volatile):len(volatile)], n.extra...) {
		s = v.re.ReplaceAllString(s, v.with)
	}
	if n.columns {
		s = padding.ReplaceAllString(s, "  ")
	}
	return s
}

var padding = regexp.MustCompile(`  +`)

// golden compares got with testdata/golden/name, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run go test ./internal/cli -run %s -update to create it", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("gbx's output differs from %s (-want +got); if the change is meant, rerun with -update:\n%s", path, diff)
	}
}

// runStatus runs gbx through Run, as cmd/gbx does, with env as its whole
// environment.
func runStatus(t *testing.T, env map[string]string, dir string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errb bytes.Buffer
	status = Run(testkit.Context(t, "gbx "+strings.Join(args, " ")), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }, Dir: dir}, args)
	return out.String(), errb.String(), status
}

// transcript is one gbx run as a golden file shows it.
func transcript(n *normaliser, args []string, stdout, stderr string, status int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ gbx %s\n", n.apply(strings.Join(args, " ")))
	fmt.Fprintf(&b, "-- exit %d --\n", status)
	fmt.Fprintf(&b, "-- stdout --\n%s", n.apply(stdout))
	fmt.Fprintf(&b, "-- stderr --\n%s", n.apply(stderr))
	return b.String()
}

// TestGoldenOutput runs each gbx command against a real box (or none, for
// the commands that need none) and compares what it prints, normalised,
// with testdata/golden.
func TestGoldenOutput(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"golden"}`)
	n := &normaliser{}
	n.add(url, "<URL>")
	n.add(key, "<KEY>")
	cfg := t.TempDir()
	n.add(cfg, "<CONFIG>")
	env := map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key, "XDG_CONFIG_HOME": cfg, "BOX_KEY": key}

	work := t.TempDir()
	n.add(work, "<DIR>")
	os.WriteFile(filepath.Join(work, "in.txt"), []byte("attached"), 0o644)

	tables := &normaliser{literal: n.literal, columns: true}
	// The log's boot lines name the sandbox layers and egress mode this
	// machine allows, and a session's closed line comes when the box
	// notices gbx has gone; the opened and prompt lines are the same
	// everywhere.
	logs := &normaliser{literal: n.literal, extra: []rule{{regexp.MustCompile(`(?m)^<TIME> \w+ +(sandbox|egress|file store|session closed).*\n`), ""}}}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		n    *normaliser
	}{
		{"noargs", nil, nil, nil},
		{"help", nil, []string{"help"}, nil},
		{"unknown", nil, []string{"frobnicate"}, nil},
		{"version", nil, []string{"version"}, nil},
		{"init", nil, []string{"init", "box", "--name", "golden"}, nil},
		{"generate", nil, []string{"generate", "box", "--out", "box/dist"}, nil},
		{"generate-check", nil, []string{"generate", "box", "--out", "box/dist", "--check"}, nil},
		{"ps-empty", env, []string{"ps"}, nil},
		{"prompt", env, []string{"prompt", "-f", "renamed.txt=in.txt", "-o", "out",
			`echo "got $(cat "$GLOVEBOX_INPUT/renamed.txt")"; echo warn >&2; printf small > "$GLOVEBOX_OUTPUT/small.txt"; seq 1 200000 > "$GLOVEBOX_OUTPUT/big.txt"; exit 3`}, nil},
		{"prompt-usage", env, []string{"prompt", "--nope"}, nil},
		{"env", env, []string{"env"}, nil},
		{"health", env, []string{"health"}, nil},
		{"health-down", nil, []string{"health", "--url", "ws://127.0.0.1:1/"}, nil},
		{"files-ls", env, []string{"files", "ls"}, tables},
		{"files-usage", env, []string{"files", "chmod"}, nil},
		{"token", env, []string{"token", "--scope", "connect"}, nil},
		{"token-usage", env, []string{"token", "--scope", "everything"}, nil},
		{"logs", env, []string{"logs"}, logs},
		{"ps", env, []string{"ps"}, tables},
		{"endpoints-ls-empty", env, []string{"endpoints", "ls"}, nil},
		{"endpoints-add", env, []string{"endpoints", "add", "golden", url, "--key-env", "BOX_KEY"}, nil},
		{"endpoints-ls", env, []string{"endpoints", "ls"}, tables},
		{"env-box", env, []string{"env", "--box", "golden"}, nil},
		{"endpoints-rm", env, []string{"endpoints", "rm", "golden"}, nil},
	}
	for _, c := range cases {
		// In order: later cases read what earlier ones made.
		stop := func() {}
		if c.name == "ps" {
			// The prompt case's gbx has exited, but the box may not have
			// seen its connection end yet: ps is to show the running
			// prompt alone.
			testkit.Until(t, "the earlier sessions to close", func() bool {
				out, _, status := runStatus(t, c.env, work, "ps")
				return status == 0 && strings.Contains(out, "no sessions")
			})
			stop = runningPrompt(t, url, key, tables)
		}
		stdout, stderr, status := runStatus(t, c.env, work, c.args...)
		stop()
		cn := n
		if c.n != nil {
			cn = c.n
		}
		golden(t, c.name, transcript(cn, c.args, stdout, stderr, status))
	}
}

// TestGoldenDemo: gbx demo brings up its own box; its whole story is
// golden.
func TestGoldenDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := &normaliser{}
	n.add(dir, "<DIR>")
	// Who runs the command depends on the sandbox this machine allows.
	// The command's stderr line and its stdout lines come through two
	// pipes, read apart: stdout's are put first, in their own order.
	n.extra = []rule{
		{regexp.MustCompile(`running as \S+ in \S+`), "running as <USER> in <WORKDIR>"},
		{regexp.MustCompile(`(?m)^(  ┆ running as <USER> in <WORKDIR>\n)((?:  │ [^\n]*\n)+)`), "$2$1"},
	}
	stdout, stderr, status := runStatus(t, nil, dir, "demo")
	golden(t, "demo", transcript(n, []string{"demo"}, stdout, stderr, status))
}

// TestGoldenDev: gbx dev's banner, up to the moment it is stopped.
func TestGoldenDev(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "glovebox.json"), []byte(`{"name":"golden-dev","agent":{"type":"exec"}}`), 0o644)
	n := &normaliser{}
	n.add(dir, "<DIR>")
	url, key, stop := startDev(t, dir, nil)
	n.add(url, "<URL>")
	n.add(key, "<KEY>")
	// Which of the box's packages this machine's PATH lacks varies.
	// So do the sandbox's layers, and which PATH entries its sessions
	// reach.
	n.extra = []rule{
		{regexp.MustCompile(`(?m)^  tools  .*$`), "  tools  <TOOLS>"},
		{regexp.MustCompile(`(?m)^         but .*\n`), ""},
		{regexp.MustCompile(`(?m)^  sandbox  .*\n(  (lacks|hidden|DEGRADED) .*\n)*`), "  sandbox  <SANDBOX>\n"},
	}
	stdout, err := stop()
	status := 0
	if err != nil {
		status = 1
		t.Errorf("gbx dev: %v", err)
	}
	golden(t, "dev", transcript(n, []string{"dev", "--addr", "127.0.0.1:0", "--no-nix"}, stdout, "", status))
}

// TestRunExitStatus: Run's status is 0, a command's own (gbx prompt passes
// on the remote command's), 2 for a usage error and 1 for any other
// failure, which it prints.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	for _, tc := range []struct {
		args   []string
		want   int
		stderr string
	}{
		{[]string{"help"}, 0, ""},
		{[]string{"version"}, 0, ""},
		{[]string{"prompt", "true"}, 0, ""},
		{nil, 2, "gbx: usage: no command given\n"},
		{[]string{"frobnicate"}, 2, "gbx: usage: unknown command \"frobnicate\"\n"},
		{[]string{"prompt", "--nope"}, 2, "gbx: usage: unknown flag: --nope\n"},
		{[]string{"prompt", "exit 7"}, 7, "exit status 7\n"},
		{[]string{"prompt", "--key", "wrong", "true"}, 1, "gbx: "},
		{[]string{"health", "--url", "ws://127.0.0.1:1/"}, 1, "gbx: "},
	} {
		_, stderr, status := runStatus(t, env, t.TempDir(), tc.args...)
		if status != tc.want || !strings.HasSuffix(stderr, tc.stderr) && !strings.HasPrefix(stderr, tc.stderr) {
			t.Errorf("gbx %s = status %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), status, stderr, tc.want, tc.stderr)
		}
		if tc.want == 0 && stderr != "" {
			t.Errorf("gbx %s succeeded but wrote to stderr: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

// runningPrompt starts a prompt that runs until the returned stop, so that
// gbx ps has a session to show whatever the timing; it names the prompt's
// id for the normaliser.
func runningPrompt(t *testing.T, url, key string, n *normaliser) (stop func()) {
	t.Helper()
	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Box("b")
	ctx, cancel := context.WithCancel(testkit.Context(t, "the sleeping prompt"))
	r, err := b.Prompt(ctx, "echo started; sleep 60", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e := range r.Events(ctx) {
		if e.Type == "text_delta" {
			break // it runs
		}
	}
	n.add(r.ID(), "<PROMPT>")
	return func() {
		cancel()
		r.Wait(context.Background())
		c.Close()
	}
}
