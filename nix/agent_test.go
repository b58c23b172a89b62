package nix_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
)

// TestBuildAgentInstall evaluates lib.buildAgent (nix/agent.nix) with a
// buildGo126Module that returns its arguments, then runs the postInstall
// it gives in a real bash on the $out/bin Go would leave: one binary named
// after main's last element. Whatever main is, the result is
// bin/glovebox-agent beside bin/glovebox-sandbox; main =
// "./cmd/glovebox-agent" used to fail, moving the binary onto itself.
func TestBuildAgentInstall(t *testing.T) {
	t.Parallel()
	nixtest.Require(t)
	agentNix := filepath.Join(nixtest.ModuleRoot(t), "nix", "agent.nix")
	for _, tc := range []struct{ main, bin string }{
		{"./cmd/myagent", "myagent"},
		{"./cmd/glovebox-agent", "glovebox-agent"},
		{"./agent", "agent"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			sup := t.TempDir()
			os.MkdirAll(filepath.Join(sup, "bin"), 0o755)
			os.WriteFile(filepath.Join(sup, "bin", "glovebox-sandbox"), []byte("sandbox"), 0o755)
			expr := "let lib = import " + filepath.Join(nixtest.StandInDir(t), "lib.nix") + "; in " +
				"(import " + agentNix + " { self = {}; } { pkgs = { inherit lib; stdenv.hostPlatform.system = \"x86_64-linux\"; buildGo126Module = a: a; }; src = /.; main = \"" + tc.main + "\"; name = \"box\"; supervisor = \"" + sup + "\"; }).postInstall"
			out, _ := nixtest.Run(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr", expr)
			var script string
			if err := decodeJSON(out, &script); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
			os.WriteFile(filepath.Join(dir, "bin", tc.bin), []byte("agent"), 0o755)
			cmd := exec.Command("bash", "-eu", "-c", script)
			cmd.Env = append(os.Environ(), "out="+dir)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("postInstall with main %q: %v\n%s\n%s", tc.main, err, script, b)
			}
			entries, _ := os.ReadDir(filepath.Join(dir, "bin"))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if fmt.Sprint(names) != "[glovebox-agent glovebox-sandbox]" {
				t.Errorf("bin/ holds %v, want [glovebox-agent glovebox-sandbox]", names)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "bin", "glovebox-agent")); string(b) != "agent" {
				t.Errorf("glovebox-agent holds %q, want the agent's binary", b)
			}
		})
	}
}
