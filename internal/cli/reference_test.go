package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// referencePath is the checked-in CLI reference, relative to this package.
var referencePath = filepath.Join("..", "..", "docs", "cli.md")

// reference renders the CLI reference from the command list and each
// command's own --help, so the page says exactly what gbx says.
func reference() (string, error) {
	var b strings.Builder
	b.WriteString("# gbx command reference\n\n")
	b.WriteString("<!-- Generated from gbx's help text by TestCLIReference in internal/cli; do not edit.\n")
	b.WriteString("     Regenerate: go test ./internal/cli -run TestCLIReference -update -->\n\n")
	var top bytes.Buffer
	usage(&top)
	fmt.Fprintf(&b, "```\n%s```\n", top.String())
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		var out, errb bytes.Buffer
		stdio := IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Dir: os.TempDir()}
		if err := execute(context.Background(), stdio, []string{c.name, "--help"}); err != nil {
			return "", fmt.Errorf("gbx %s --help: %w", c.name, err)
		}
		if out.Len() > 0 {
			return "", fmt.Errorf("gbx %s --help wrote to stdout: %q", c.name, out.String())
		}
		fmt.Fprintf(&b, "\n## gbx %s\n\n%s.\n\n```\n%s```\n", c.name, strings.ToUpper(c.summary[:1])+c.summary[1:], errb.String())
	}
	return b.String(), nil
}

// TestCLIReference fails when docs/cli.md is not what gbx's help says
// now; -update rewrites it.
func TestCLIReference(t *testing.T) {
	t.Parallel()
	got, err := reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if !strings.Contains(got, "\n## gbx "+c.name+"\n") || !strings.Contains(got, "Usage: gbx "+c.name) {
			t.Errorf("the reference has no section with the usage of gbx %s", c.name)
		}
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(referencePath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v; run go test ./internal/cli -run TestCLIReference -update", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("docs/cli.md is stale (-checked-in +generated); run go test ./internal/cli -run TestCLIReference -update:\n%s", diff)
	}
}
