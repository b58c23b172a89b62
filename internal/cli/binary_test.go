package cli

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// buildGbx builds cmd/gbx into a temporary directory.
func buildGbx(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the gbx binary")
	}
	bin := filepath.Join(t.TempDir(), "gbx")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/glovebox-dev/glovebox/cmd/gbx")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaries runs the built gbx as a person would: the demo, then a box
// under gbx dev prompted by gbx prompt, then Ctrl-C.
func TestBinaries(t *testing.T) {
	t.Parallel()
	bin := buildGbx(t)
	work := t.TempDir()

	demo := exec.Command(bin, "demo", "-o", "saved")
	demo.Dir = work
	out, err := demo.CombinedOutput()
	if err != nil {
		t.Fatalf("gbx demo: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Checked: shout.txt is notes.txt in capitals") {
		t.Errorf("gbx demo output:\n%s", out)
	}
	if err := checkDemoOutputs(filepath.Join(work, "saved")); err != nil {
		t.Error(err)
	}

	boxDir := filepath.Join(work, "box")
	os.MkdirAll(boxDir, 0o755)
	os.WriteFile(filepath.Join(boxDir, "glovebox.json"), []byte(`{"name":"binbox","agent":{"type":"exec"}}`), 0o644)
	dev := exec.Command(bin, "dev", boxDir, "--addr", "127.0.0.1:0", "--no-nix")
	dev.Env = append(os.Environ(), "GLOVEBOX_KEY=binary-test-key")
	stdout, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dev.Stderr = os.Stderr
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	defer dev.Process.Kill()
	sc := bufio.NewScanner(stdout)
	var url string
	var head strings.Builder
	for sc.Scan() {
		head.WriteString(sc.Text() + "\n")
		if u, ok := strings.CutPrefix(sc.Text(), "  url    "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatalf("gbx dev printed no url:\n%s", head.String())
	}
	rest := make(chan string)
	go func() {
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		rest <- b.String()
	}()

	prompt := exec.Command(bin, "prompt", "--url", url, "echo hello from the binary; exit 7")
	prompt.Env = append(os.Environ(), "GLOVEBOX_KEY=binary-test-key")
	var pout strings.Builder
	prompt.Stdout = &pout
	err = prompt.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
		t.Errorf("gbx prompt exit = %v, want status 7 (the remote command's)", err)
	}
	if pout.String() != "hello from the binary\n" {
		t.Errorf("gbx prompt stdout = %q", pout.String())
	}

	if err := dev.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// Its output is read to the end before Wait, which closes the pipe
	// once the process has exited, possibly before its last line was read.
	if tail := testkit.Recv(t, rest, "the rest of gbx dev's log"); !strings.Contains(tail, "stopped") {
		t.Errorf("gbx dev did not say it stopped:\n%s", tail)
	}
	if err := testkit.Exit(t, dev, "gbx dev after Ctrl-C"); err != nil {
		t.Errorf("gbx dev after Ctrl-C: %v, want exit 0", err)
	}
}
