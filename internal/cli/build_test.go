package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Stand-ins for the tools this machine cannot run for real: a Nix new
// enough for the pinned nixpkgs (Debian's is 2.8) that "builds" by making
// the out link a program printing an image stream, and a Docker engine
// (there is none here) whose load keeps what it reads. They record their
// arguments and working directory, so the tests see exactly what gbx, or
// a command it prints, ran.
const (
	stubNix = `#!/bin/sh
if [ "$1" = --version ]; then echo "nix (Nix) 2.28.3"; exit 0; fi
echo "$PWD $*" >> "$TOOLS_LOG"
link=./result
while [ $# -gt 0 ]; do
  if [ "$1" = --out-link ]; then link=$2; fi
  shift
done
printf '#!/bin/sh\nprintf "IMAGE-STREAM"\n' > "$link"
chmod +x "$link"
`
	stubDocker = `#!/bin/sh
echo "$PWD docker $*" >> "$TOOLS_LOG"
[ "$1" = load ] && cat > "$LOADED"
echo "Loaded image"
`
)

// tools makes a directory of the stand-ins named, and returns the
// environment that puts it first on PATH, with /usr/bin and /bin for sh.
func tools(t *testing.T, names ...string) (env map[string]string, log, loaded string) {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		src := map[string]string{"nix": stubNix, "docker": stubDocker, "podman": strings.Replace(stubDocker, " docker ", " podman ", 1)}[n]
		if err := os.WriteFile(filepath.Join(dir, n), []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log, loaded = filepath.Join(dir, "log"), filepath.Join(dir, "loaded")
	return map[string]string{"PATH": dir + ":/usr/bin:/bin", "TOOLS_LOG": log, "LOADED": loaded}, log, loaded
}

// gbxTools runs gbx in dir with env as its environment, set in the
// process too, so that the commands gbx starts see it.
func gbxTools(t *testing.T, dir string, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	return gbxEnv(t, dir, env, args...)
}

// generated writes a box with glovebox.toml toml and runs gbx generate.
func generated(t *testing.T, toml string) string {
	t.Helper()
	dir := writeBox(t, toml)
	if _, errOut, err := gbxEnv(t, dir, map[string]string{"GLOVEBOX_KEY": protocol.NewKey()}, "generate"); err != nil {
		t.Fatalf("gbx generate: %v\n%s", err, errOut)
	}
	return dir
}

// TestBuildLoads: gbx build runs nix build of dist/'s image, then streams
// the result into docker load (or podman's when there is no docker); a Go
// agent's image is built from the box directory's flake entered at dist.
func TestBuildLoads(t *testing.T) {
	for _, tc := range []struct {
		name, toml, engine, ref string
	}{
		{"docker", "name = \"b\"\n", "docker", "build path:DIR/dist#image --out-link DIR/dist/result"},
		{"podman", "name = \"b\"\n", "podman", "build path:DIR/dist#image --out-link DIR/dist/result"},
		{"go agent", "name = \"b\"\n[agent]\ntype = \"go\"\nmain = \"./cmd/glovebox-agent\"\n", "docker", "build path:DIR?dir=dist#image --out-link DIR/dist/result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := generated(t, tc.toml)
			env, log, loaded := tools(t, "nix", tc.engine)
			out, errOut, err := gbxTools(t, dir, env, "build")
			if err != nil {
				t.Fatalf("gbx build: %v\n%s", err, errOut)
			}
			if b, _ := os.ReadFile(loaded); string(b) != "IMAGE-STREAM" {
				t.Errorf("%s load read %q, want the image stream", tc.engine, b)
			}
			logged, _ := os.ReadFile(log)
			if want := strings.ReplaceAll(tc.ref, "DIR", dir); !strings.Contains(string(logged), want) {
				t.Errorf("tools ran:\n%s\nwant nix %s", logged, want)
			}
			if !strings.Contains(out, "loaded b:0.1.0 into "+tc.engine) {
				t.Errorf("gbx build printed %q", out)
			}
		})
	}
}

// TestBuildSaysWhatIsMissing: without nix, with a nix too old for the
// pinned nixpkgs (this machine's real one when it has it), before
// generate, and without docker or podman, gbx build says what to do.
func TestBuildSaysWhatIsMissing(t *testing.T) {
	realNix, realErr := exec.LookPath("nix")
	dir := generated(t, "name = \"b\"\n")
	env, _, _ := tools(t)
	env["PATH"] = t.TempDir() // not even sh
	if _, _, err := gbxTools(t, dir, env, "build"); err == nil || !strings.Contains(err.Error(), "there is no nix on PATH: install it (nixos.org/download), or build dist/Dockerfile with `docker build`") {
		t.Errorf("without nix: %v", err)
	}
	if _, _, err := gbxTools(t, writeBox(t, "name = \"b\"\n"), env, "build"); err == nil || !strings.Contains(err.Error(), "no flake.nix in dist: run `gbx generate .` first") {
		t.Errorf("before generate: %v", err)
	}
	env, log, _ := tools(t, "nix")
	out, _, err := gbxTools(t, dir, env, "build")
	if err != nil || !strings.Contains(out, "built b:0.1.0, but found neither docker nor podman on PATH to load it into: run dist/result | docker load") {
		t.Errorf("without an engine: %q, %v", out, err)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "build path:") {
		t.Errorf("nix build did not run: %q", b)
	}
	if realErr != nil {
		t.Skip("no nix here to be too old")
	}
	if checkNixVersion(context.Background(), realNix) == nil {
		t.Skipf("this machine's %s is not older than 2.18", realNix)
	}
	only := t.TempDir()
	if err := os.Symlink(realNix, filepath.Join(only, "nix")); err != nil {
		t.Fatal(err)
	}
	env["PATH"] = only
	if _, _, err := gbxTools(t, dir, env, "build"); err == nil || !strings.Contains(err.Error(), ", and the pinned nixpkgs needs 2.18 or newer: install a current Nix") {
		t.Errorf("with %s: %v", realNix, err)
	}
}

// TestNextStepsRun runs the build line gbx generate prints, as printed,
// in a shell in the directory gbx ran in: ./result runs where nix build
// left it, and its stream reaches docker load. For a Go agent the line
// builds the box directory's flake.
func TestNextStepsRun(t *testing.T) {
	for _, toml := range []string{"name = \"b\"\n", "name = \"b\"\n[agent]\ntype = \"go\"\nmain = \"./cmd/agent\"\n"} {
		box := writeBox(t, toml)
		parent := filepath.Dir(box)
		out, errOut, err := gbxEnv(t, parent, map[string]string{"GLOVEBOX_KEY": protocol.NewKey()}, "generate", filepath.Base(box))
		if err != nil {
			t.Fatalf("gbx generate: %v\n%s", err, errOut)
		}
		m := regexp.MustCompile(`\(or: (.*)\)\n`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no build line in:\n%s", out)
		}
		env, log, loaded := tools(t, "nix", "docker")
		cmd := exec.Command("sh", "-euc", m[1])
		cmd.Dir = parent
		cmd.Env = []string{"PATH=" + env["PATH"], "TOOLS_LOG=" + log, "LOADED=" + loaded}
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", m[1], err, b)
		}
		if b, _ := os.ReadFile(loaded); string(b) != "IMAGE-STREAM" {
			t.Errorf("%s: docker load read %q", m[1], b)
		}
		logged, _ := os.ReadFile(log)
		want := filepath.Join(box, "dist") + " build .#image"
		if strings.Contains(toml, "go") {
			want = box + " build path:.?dir=dist#image"
		}
		if !strings.HasPrefix(string(logged), want) {
			t.Errorf("%s ran %q, want %q", m[1], logged, want)
		}
	}
}

// TestDevChecksNixVersion: gbx dev does not try to build the pinned
// nixpkgs with a Nix too old to evaluate it (this machine's, when it has
// one), and says why; with another nixpkgs (GLOVEBOX_DEV_NIXPKGS) it
// leaves the question to that nixpkgs.
func TestDevChecksNixVersion(t *testing.T) {
	t.Parallel()
	realNix, err := exec.LookPath("nix")
	if err != nil {
		t.Skip("no nix here")
	}
	if checkNixVersion(context.Background(), realNix) == nil {
		t.Skipf("this machine's %s is not older than 2.18", realNix)
	}
	m, err := protocol.ParseManifest([]byte(`{"name":"d","packages":{"nix":["jq"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	stdio := IO{Stderr: &stderr, Getenv: func(string) string { return "" }}
	tools := findDevTools(context.Background(), stdio, m, filepath.Dir(realNix), true)
	if !strings.Contains(tools.warning, "is Nix 2.") || !strings.Contains(tools.warning, "the pinned nixpkgs needs 2.18 or newer") {
		t.Errorf("warning = %q, want the Nix version named", tools.warning)
	}
	if strings.Contains(stderr.String(), "building the box's packages") {
		t.Errorf("gbx dev ran nix build with a Nix too old: %s", stderr.String())
	}
}
