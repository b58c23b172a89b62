package sandbox

import (
	"bufio"
	"os"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestUsageReadsTheSessionsCgroup runs a process that holds memory and
// reads the session's usage while it runs.
func TestUsageReadsTheSessionsCgroup(t *testing.T) {
	b := newBox(t, Config{})
	if !b.sb.Report().Has(LayerCgroup) {
		t.Skip("no cgroup here: ", b.sb.Report())
	}
	ss, dir := b.session(t, "usage")
	if _, ok := ss.Usage(); ok {
		t.Errorf("Usage before anything started: ok, want none (no cgroup yet)")
	}
	inR, inW, _ := os.Pipe()
	defer inW.Close()
	outR, outW, _ := os.Pipe()
	defer outR.Close()
	// Some 32 MiB held in the shell's memory, then a wait on stdin.
	script := `x=$(head -c 33554432 /dev/zero | tr '\0' a); sleep 30 & echo held; read _`
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}, Stdin: inR, Stdout: outW, Stderr: outW})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Kill()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(outR).ReadString('\n')
		lines <- line
	}()
	if got := testkit.Recv(t, lines, "the memory held"); got != "held\n" {
		t.Fatalf("printed %q, want held", got)
	}
	u, ok := ss.Usage()
	if !ok {
		t.Fatal("Usage while a process runs: not ok")
	}
	if u.Memory < 32<<20 || u.Procs < 2 {
		t.Errorf("Usage = %+v, want at least 32 MiB and 2 processes (the shell and its sleep)", u)
	}
	if u.CPU == 0 {
		t.Errorf("Usage = %+v, want some CPU time (or -1: not counted)", u)
	}
	ss.Close()
	if _, ok := ss.Usage(); ok {
		t.Errorf("Usage after Close: ok, want none")
	}
}
