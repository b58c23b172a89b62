package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

var demoCommand = command{
	name:    "demo",
	summary: "bring up a real box in process, prompt it, and show what comes back",
	run:     runDemo,
}

// demoManifest is the demo box: every default, the exec agent.
const demoManifest = `{"name": "demo", "version": "0.1.0", "agent": {"type": "exec"}}`

// demoInput is the file the demo attaches to its prompt.
const demoInput = "Glovebox runs an agent in a box of its own,\nand hands back the files it makes.\n"

// demoLines is how many lines the demo's large output has: enough to be
// over the 1MB inline limit, so it comes back as a server ref.
const demoLines = 300000

// demoScript is the prompt: the exec agent runs it with /bin/sh in the
// session's work directory.
var demoScript = strings.Join([]string{
	`n=$(wc -c < "$GLOVEBOX_INPUT/notes.txt")`,
	`echo "read notes.txt from the input directory: $n bytes"`,
	`tr 'a-z' 'A-Z' < "$GLOVEBOX_INPUT/notes.txt" > "$GLOVEBOX_OUTPUT/shout.txt"`,
	`echo "wrote shout.txt: the notes in capitals"`,
	fmt.Sprintf(`seq 1 %d > "$GLOVEBOX_OUTPUT/numbers.txt"`, demoLines),
	`echo "wrote numbers.txt: $(wc -l < "$GLOVEBOX_OUTPUT/numbers.txt") lines, $(wc -c < "$GLOVEBOX_OUTPUT/numbers.txt") bytes"`,
	`echo "running as $(id -un) in $(pwd)" >&2`,
}, "\n")

func runDemo(ctx context.Context, stdio IO, args []string) error {
	var out string
	fs := newFlags(stdio, "demo", "demo [-o DIR]\n\nBrings up a real box in this process (the kit and the exec agent, no container,\nno files needed), prompts it through the Go client with a shell command that\nreads an attached file and writes two outputs (one small, returned inline; one\nover 1MB, stored on the box and fetched from its /files route), saves them and\nstops the box.")
	fs.StringVarP(&out, "out", "o", "gbx-demo-output", "where to save the outputs")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: demo takes no arguments", ErrUsage)
	}
	out = absPath(stdio, out)
	w := stdio.Stdout
	start := time.Now()

	root, err := os.MkdirTemp("", "gbx-demo-")
	if err != nil {
		return fmt.Errorf("demo directory: %w", err)
	}
	defer os.RemoveAll(root)
	// The sessions' uids must be able to enter the box's root where no
	// mount namespace gives them their directories: the kit itself makes
	// what is private in it so.
	if err := os.Chmod(root, 0o711); err != nil {
		return fmt.Errorf("demo directory: %w", err)
	}
	m, err := protocol.ParseManifest([]byte(demoManifest))
	if err != nil {
		return err
	}
	key := protocol.NewKey()
	m.KeyFingerprint = protocol.Fingerprint(key)
	boxCtx, stopBox := context.WithCancel(ctx)
	defer stopBox()
	box, err := startLocalBox(boxCtx, localBoxOptions{Manifest: m, Key: key, Root: root, Addr: "127.0.0.1:0",
		Getenv: func(string) string { return "" }, AllowDegraded: true, Logger: slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer box.Close()
	fmt.Fprintf(w, "▸ Booted box %q in this process: the kit on %s, the exec agent (/bin/sh), a fresh key.\n", m.Name, box.URL)
	fmt.Fprintf(w, "  No container: the box's directories are under %s and go away at the end.\n", root)

	c, err := client.New(map[string]client.Endpoint{"demo": {URL: box.URL, Key: key}})
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := c.Box("demo")
	if err != nil {
		return err
	}
	env, err := b.Environment(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "▸ GET /environment: %s %s, protocol v%d, capabilities %s.\n", env.Name, env.Version, env.ProtocolVersion, strings.Join(env.Capabilities, ", "))

	exit, err := demoPrompt(ctx, stdio, b, out)
	if err != nil {
		return err
	}
	c.Close()
	if err := box.Close(); err != nil {
		return fmt.Errorf("stop the box: %w", err)
	}
	fmt.Fprintf(w, "▸ Stopped the box and removed its directories (%s in all).\n", time.Since(start).Round(time.Millisecond))
	if exit != 0 {
		return &ExitError{Code: 1}
	}
	return nil
}

// demoPrompt sends the demo's prompt to b, prints what comes back,
// saves the outputs under out and checks them; it returns the command's
// exit status.
func demoPrompt(ctx context.Context, stdio IO, b *client.Box, out string) (int, error) {
	w := stdio.Stdout
	fmt.Fprintf(w, "▸ Prompting it over WebSocket with notes.txt (%d bytes) attached. The prompt is a shell script:\n", len(demoInput))
	for _, line := range strings.Split(demoScript, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
	r, err := b.Prompt(ctx, demoScript, client.PromptOptions{Files: map[string]client.File{"notes.txt": {Data: []byte(demoInput), Mime: "text/plain"}}})
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "▸ Streamed events (stdout │, stderr ┆):\n")
	exit := printDemoEvents(ctx, w, r)
	done, err := r.Wait(ctx)
	if err != nil {
		return 0, fmt.Errorf("the demo prompt failed: %w", err)
	}
	fmt.Fprintf(w, "▸ The command exited with status %d; the prompt completed with %d outputs:\n", exit, len(done.Outputs))
	if err := saveDemoOutputs(ctx, stdio, r, done, out); err != nil {
		return 0, err
	}
	if err := checkDemoOutputs(out); err != nil {
		return 0, fmt.Errorf("the demo's outputs are not what the box wrote: %w", err)
	}
	fmt.Fprintf(w, "▸ Checked: shout.txt is notes.txt in capitals; numbers.txt counts 1 to %d.\n", demoLines)
	return exit, nil
}

// printDemoEvents prints the prompt's events as they come, its output
// line by line, and returns the command's exit status (-1 without one).
func printDemoEvents(ctx context.Context, w io.Writer, r *client.Result) int {
	exit := -1
	var pending [2]string
	for e := range r.Events(ctx) {
		switch e.Type {
		case "text_delta":
			var d struct{ Text, Stream string }
			json.Unmarshal(e.Data, &d)
			i, mark := 0, "│"
			if d.Stream == "stderr" {
				i, mark = 1, "┆"
			}
			pending[i] += d.Text
			for {
				line, rest, ok := strings.Cut(pending[i], "\n")
				if !ok {
					break
				}
				fmt.Fprintf(w, "  %s %s\n", mark, line)
				pending[i] = rest
			}
		case "exit":
			var x struct{ Code int }
			json.Unmarshal(e.Data, &x)
			exit = x.Code
		default:
			fmt.Fprintf(w, "  · %s %s\n", e.Type, clip(string(e.Data), 100))
		}
	}
	for i, mark := range []string{"│", "┆"} {
		if pending[i] != "" {
			fmt.Fprintf(w, "  %s %s\n", mark, pending[i])
		}
	}
	return exit
}

// saveDemoOutputs saves each output of the completed prompt under out,
// consuming it on the box, and says how it came back.
func saveDemoOutputs(ctx context.Context, stdio IO, r *client.Result, done *client.Completion, out string) error {
	w := stdio.Stdout
	for _, name := range slices.Sorted(maps.Keys(done.Outputs)) {
		ref := done.Outputs[name]
		how := "inline: its bytes came in the complete message"
		if ref.Kind == protocol.KindServer {
			how = "server: stored on the box, fetched from " + ref.URL
		}
		dest := filepath.Join(out, name)
		rc, err := r.Read(ctx, name, client.Consume())
		if err != nil {
			return err
		}
		n, err := saveFile(dest, rc)
		rc.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-12s %-7s %9s  %s\n  %12s saved to %s\n", name, ref.Kind, humanSize(n), how, "", displayPath(stdio, dest))
	}
	return nil
}

// checkDemoOutputs verifies the saved outputs against what the script
// wrote.
func checkDemoOutputs(dir string) error {
	shout, err := os.ReadFile(filepath.Join(dir, "shout.txt"))
	if err != nil {
		return err
	}
	if string(shout) != strings.ToUpper(demoInput) {
		return fmt.Errorf("shout.txt = %q, want %q", shout, strings.ToUpper(demoInput))
	}
	f, err := os.Open(filepath.Join(dir, "numbers.txt"))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	want := 1
	for sc.Scan() {
		if sc.Text() != fmt.Sprint(want) {
			return fmt.Errorf("numbers.txt line %d = %q", want, sc.Text())
		}
		want++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if want-1 != demoLines {
		return fmt.Errorf("numbers.txt has %d lines, want %d", want-1, demoLines)
	}
	return nil
}

// displayPath shows p relative to the working directory when it is under
// it.
func displayPath(stdio IO, p string) string {
	if rel, err := filepath.Rel(stdio.Dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return "./" + filepath.ToSlash(rel)
	}
	return p
}
