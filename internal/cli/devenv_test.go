package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/generator"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// devRun is a gbx dev running in process through Run.
type devRun struct {
	banner, url, key string
	stderr           *testkit.LogBuffer
	stop             func() error
}

// devUntilBanner runs gbx dev ARGS in dir with env as its environment (and this
// process's for what the kit passes agents), until its banner is out.
func devUntilBanner(t *testing.T, dir string, env map[string]string, args ...string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	errb := &testkit.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		err := execute(ctx, IO{Stdin: strings.NewReader(""), Stdout: pw, Stderr: errb,
			Getenv: func(k string) string { return env[k] }, Dir: dir}, append([]string{"dev", "--addr", "127.0.0.1:0"}, args...))
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	giveUp := time.AfterFunc(testkit.Timeout, func() { pw.CloseWithError(fmt.Errorf("gave up waiting for gbx dev's banner")) })
	sc := bufio.NewScanner(pr)
	var banner strings.Builder
	for sc.Scan() {
		banner.WriteString(sc.Text() + "\n")
		if sc.Text() == "Ctrl-C stops it." {
			break
		}
	}
	giveUp.Stop()
	go io.Copy(io.Discard, pr)
	d := &devRun{banner: banner.String(), stderr: errb}
	stopped := false
	d.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return testkit.Recv(t, done, "gbx dev to stop")
	}
	t.Cleanup(func() { d.stop() })
	m := devURLRE.FindStringSubmatch(d.banner)
	if m == nil {
		d.stop()
		t.Fatalf("gbx dev printed no url:\n%s\nstderr:\n%s", d.banner, errb.String())
	}
	d.url, d.key = m[1], m[2]
	return d
}

// pathOf makes a directory of links to the named programs of this
// machine, to serve as a PATH holding only them.
func pathOf(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			t.Skipf("%s is not installed", n)
		}
		if err := os.Symlink(p, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeBox(t *testing.T, toml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "glovebox.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// warnings are gbx dev's warnings of the box's packages: not those of
// PATH entries the sandbox keeps sessions from (TestDevPathUnreachableAsRoot),
// which depend on who runs the tests and on this machine's PATH.
func warnings(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "gbx dev: warning:") && !strings.Contains(l, "not reachable by the sessions' processes") {
			out = append(out, l)
		}
	}
	return out
}

func TestDevWarnsOfMissingPackages(t *testing.T) {
	t.Parallel()
	dir := writeBox(t, "name = \"docsbox\"\nbase = \"docs\"\n[packages]\nnix = [\"jq\"]\n")
	path := pathOf(t, "sh", "jq", "ls")
	d := devUntilBanner(t, dir, map[string]string{"PATH": path})
	w := warnings(d.stderr.String())
	if len(w) != 1 {
		t.Fatalf("warnings = %q, want one line\nstderr:\n%s", w, d.stderr.String())
	}
	for _, want := range []string{"no nix on PATH", "poppler-utils (pdftotext)", "pandoc (pandoc)", "gnugrep (grep)"} {
		if !strings.Contains(w[0], want) {
			t.Errorf("warning %q does not name %q", w[0], want)
		}
	}
	for _, present := range []string{"jq (", "coreutils (", "dejavu_fonts", "tzdata"} {
		if strings.Contains(w[0], present) {
			t.Errorf("warning %q names %q, which is on PATH or has no program", w[0], present)
		}
	}
	if !strings.Contains(d.banner, "  tools  this machine's PATH, without") {
		t.Errorf("banner does not say which tools prompts get:\n%s", d.banner)
	}
	// The prompt gets exactly that PATH.
	stdout, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", d.url, "--key", d.key, `echo "$PATH"; command -v pdftotext || echo no pdftotext`)
	if err != nil || stdout != path+"\nno pdftotext\n" {
		t.Errorf("the prompt's PATH = %q, %v, want %q and no pdftotext\n%s", stdout, err, path, stderr)
	}

	// Everything there: no warning. --no-nix where nix is installed says so.
	full := writeBox(t, "name = \"jqbox\"\n[packages]\nnix = [\"jq\"]\n")
	d2 := devUntilBanner(t, full, map[string]string{"PATH": os.Getenv("PATH")}, "--no-nix")
	if w := warnings(d2.stderr.String()); lookPathIn("nix", os.Getenv("PATH")) != "" && len(w) == 1 && !strings.Contains(w[0], "--no-nix") {
		t.Errorf("warning with --no-nix = %q, want it to name --no-nix", w)
	}
}

func TestDevCleanAndHostEnv(t *testing.T) {
	t.Setenv("GBX_DEV_HOST_MARKER", "from-host")
	t.Setenv("GLOVEBOX_KEY", "host-key-never-reaches-agents")
	dir := writeBox(t, "name = \"envbox\"\n[env.DECLARED]\ndefault = \"declared-value\"\n")
	script := `echo "marker=$GBX_DEV_HOST_MARKER declared=$DECLARED key=$GLOVEBOX_KEY"`
	for _, c := range []struct {
		args   []string
		want   string
		banner string
	}{
		{nil, "marker= declared=declared-value key=\n", "env    clean"},
		{[]string{"--host-env"}, "marker=from-host declared=declared-value key=\n", "env    this shell's"},
		{[]string{"--clean-env=false"}, "marker=from-host declared=declared-value key=\n", "env    this shell's"},
	} {
		t.Run(strings.Join(append([]string{"default"}, c.args...), " "), func(t *testing.T) {
			d := devUntilBanner(t, dir, map[string]string{"PATH": os.Getenv("PATH")}, append(c.args, "--no-nix")...)
			if !strings.Contains(d.banner, c.banner) {
				t.Errorf("banner lacks %q:\n%s", c.banner, d.banner)
			}
			stdout, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", d.url, "--key", d.key, script)
			if err != nil || stdout != c.want {
				t.Errorf("prompt = %q, %v; want %q\n%s", stdout, err, c.want, stderr)
			}
		})
	}
}

var exportRE = regexp.MustCompile(`(?m)^  (export GLOVEBOX_URL=\S+ GLOVEBOX_KEY=\S+)$`)
var inspectRE = regexp.MustCompile(`(?m)^  inspect (http://\S+)/inspect/#token=(\S+)$`)

// TestDevBannerExports runs the built gbx: the banner's export line, pasted
// into a shell, lets gbx prompt find the box with no flags, and its
// inspector link opens the inspector.
func TestDevBannerExports(t *testing.T) {
	t.Parallel()
	bin := buildGbx(t)
	dir := writeBox(t, "name = \"exported\"\n")
	dev := exec.Command(bin, "dev", dir, "--addr", "127.0.0.1:0", "--no-nix")
	dev.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stdout, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dev.Stderr = os.Stderr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer dev.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if sc.Text() == "Ctrl-C stops it." {
				lines <- b.String()
				io.Copy(io.Discard, stdout)
				return
			}
		}
		lines <- b.String()
	}()
	banner := testkit.Recv(t, lines, "gbx dev's banner")
	m := exportRE.FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no export line in the banner:\n%s", banner)
	}
	sh := exec.Command("/bin/sh", "-c", m[1]+"; exec \"$GBX\" prompt 'echo found by the environment'")
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "GBX=" + bin, "HOME=" + t.TempDir()}
	out, err := sh.CombinedOutput()
	if err != nil || string(out) != "found by the environment\n" {
		t.Errorf("gbx prompt after the export line = %q, %v", out, err)
	}

	im := inspectRE.FindStringSubmatch(banner)
	if im == nil {
		t.Fatalf("no inspector link in the banner:\n%s", banner)
	}
	req, _ := http.NewRequest(http.MethodPost, im[1]+"/inspect/api/login", nil)
	req.Header.Set("Authorization", "Bearer "+im[2])
	req.Header.Set("X-Glovebox-Inspect", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("login with the banner's inspect token = %d, want 200", resp.StatusCode)
	}

	dev.Process.Signal(syscall.SIGINT)
	if err := testkit.Exit(t, dev, "gbx dev after Ctrl-C"); err != nil {
		t.Errorf("gbx dev after Ctrl-C: %v", err)
	}
}

// TestDevRunsPromptsInsideTheBoxsPackages runs gbx dev with Nix: the box's
// environment is built with nix build from a local stand-in for nixpkgs
// (GLOVEBOX_DEV_NIXPKGS; this machine has no nixpkgs) whose packages are
// real derivations holding a program each, and a prompt finds the docs
// base's pdftotext, which this machine lacks, on its PATH.
func TestDevRunsPromptsInsideTheBoxsPackages(t *testing.T) {
	t.Parallel()
	nix, err := exec.LookPath("nix")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nix is not installed")
		}
		t.Skip("nix is not installed")
	}
	if _, err := exec.LookPath("pdftotext"); err == nil {
		t.Skip("pdftotext is installed here: the test could not tell where it came from")
	}
	dir := writeBox(t, "name = \"docsbox\"\nbase = \"docs\"\n[packages]\nnix = [\"jq\"]\n")
	cfg, err := generatorLoad(dir)
	if err != nil {
		t.Fatal(err)
	}
	var attrs strings.Builder
	for _, pkg := range cfg.DevEnv().Packages {
		script := "PATH=/usr/bin:/bin; mkdir -p $out/bin"
		for _, prog := range packagePrograms(pkg) {
			script += fmt.Sprintf("; printf '#!/bin/sh\\necho %s from the box\\n' > $out/bin/%s; chmod +x $out/bin/%s", prog, prog, prog)
		}
		fmt.Fprintf(&attrs, "      %q = derivation { name = %q; inherit system; builder = \"/bin/sh\"; args = [ \"-c\" %q ]; };\n", pkg, pkg, script)
	}
	standIn := t.TempDir()
	flake := `{
  outputs = { self }: {
    legacyPackages.x86_64-linux = let system = "x86_64-linux"; in {
      lib = {
        attrByPath = p: d: s: if p == [ ] then s else if s ? ${builtins.head p} then self.legacyPackages.x86_64-linux.lib.attrByPath (builtins.tail p) d s.${builtins.head p} else d;
        splitString = sep: s: builtins.filter builtins.isString (builtins.split "\\." s);
      };
      buildEnv = { name, paths, ... }: derivation {
        inherit name system paths;
        builder = "/bin/sh";
        args = [ "-c" "PATH=/usr/bin:/bin; mkdir -p $out/bin; for p in $paths; do for f in $p/bin/*; do [ -e \"$f\" ] && ln -sf $f $out/bin/; done; done; true" ];
      };
` + attrs.String() + `    };
  };
}
`
	if err := os.WriteFile(filepath.Join(standIn, "flake.nix"), []byte(flake), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"PATH":                 filepath.Dir(nix) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"GLOVEBOX_DEV_NIXPKGS": "path:" + standIn,
		// Builds here run without a sandbox or a binary cache.
		"NIX_CONFIG": "experimental-features = nix-command flakes\nbuild-users-group =\nsandbox = false\nsubstituters =",
	}
	d := devUntilBanner(t, dir, env)
	if w := warnings(d.stderr.String()); len(w) != 0 {
		t.Errorf("warnings with nix: %q", w)
	}
	if !strings.Contains(d.banner, "  tools  the box's packages, built by nix: /nix/store/") {
		t.Fatalf("banner does not name the nix environment:\n%s\nstderr:\n%s", d.banner, d.stderr.String())
	}
	stdout, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", d.url, "--key", d.key, `pdftotext; jq`)
	if err != nil || stdout != "pdftotext from the box\njq from the box\n" {
		t.Errorf("prompt = %q, %v; want the box's pdftotext and jq\n%s", stdout, err, stderr)
	}
}

func generatorLoad(dir string) (*generator.Config, error) { return generator.Load(dir) }

func TestNixError(t *testing.T) {
	t.Parallel()
	in := "warning: unable to download 'x'; retrying\nerror: unable to download 'https://api.github.com/...': Couldn't resolve host name (6)\n(use '--show-trace' to show detailed location information)\n"
	if got := nixError(in); got != "error: unable to download 'https://api.github.com/...': Couldn't resolve host name (6)" {
		t.Errorf("nixError = %q, want the error line", got)
	}
	if got := nixError("just this\n"); got != "just this" {
		t.Errorf("nixError without an error line = %q, want the last line", got)
	}
}
