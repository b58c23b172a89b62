package generator

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDevEnv(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("name = \"d\"\nbase = \"docs\"\n[packages]\nnix = [\"jq\", \"python3Packages.rich\", \"coreutils\"]\npip = [\"requests\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := c.DevEnv()
	if !strings.Contains(strings.Join(d.Packages, " "), "coreutils") || !strings.Contains(strings.Join(d.Packages, " "), "poppler-utils") {
		t.Errorf("Packages = %v, want the base's, the docs base's and jq", d.Packages)
	}
	if got := d.Packages[len(d.Packages)-1]; got != "jq" {
		t.Errorf("last package = %q, want jq (coreutils once)", got)
	}
	if diff := cmp.Diff([]string{"rich", "requests"}, d.Python); diff != "" {
		t.Errorf("Python (-want +got):\n%s", diff)
	}
}

// TestDevEnvExprParses checks the expression with nix-instantiate --parse,
// with a hostile name that must stay inert.
func TestDevEnvExprParses(t *testing.T) {
	t.Parallel()
	nix, err := exec.LookPath("nix-instantiate")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nix-instantiate is not installed")
		}
		t.Skip("nix-instantiate is not installed")
	}
	expr, err := DevEnv{Packages: []string{"jq", "poppler-utils"}, Python: []string{"rich"}}.NixExpr("x${builtins.abort \"pwned\"}", "")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "env.nix")
	os.WriteFile(p, []byte(expr), 0o644)
	out, err := exec.Command(nix, "--parse", p).CombinedOutput()
	if err != nil {
		t.Fatalf("nix-instantiate --parse: %v\n%s\n%s", err, out, expr)
	}
	if !strings.Contains(string(out), `"glovebox-dev-x\${builtins.abort \"pwned\"}"`) {
		t.Errorf("the name is not an inert string in the parsed expression:\n%s", out)
	}
}
