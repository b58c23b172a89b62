//go:build linux

package sandbox

import (
	"os/exec"
	"syscall"
	"testing"
)

// BenchmarkCommand is one `sh -c true` started and waited for: through a
// warm session's supervisor with every layer, and by the benchmark itself
// (the floor). The difference is the sandbox's own cost per command.
func BenchmarkCommand(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("session", func(b *testing.B) {
		bx := newBox(b, Config{})
		ss, dir := bx.session(b, "bench")
		if err := ss.Warm(); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				b.Fatal(err)
			}
			if st, _ := p.Wait(); st.Code != 0 {
				b.Fatal(st)
			}
		}
	})
}

// BenchmarkProbe is the namespace probe New makes at boot: a supervisor
// started in every namespace, set up, and gone. The "glovebox-sandbox"
// runs start cmd/glovebox-sandbox (built for the benchmark) instead of
// re-executing the test binary.
func BenchmarkProbe(b *testing.B) {
	bx := newBox(b, Config{})
	sibling, _ := boxWith(b, Config{}, supervisorDir(b))
	if sibling.sb.Supervisor() == "" {
		b.Fatal("the sibling glovebox-sandbox is not used")
	}
	for _, p := range []struct {
		name  string
		flags uintptr
		sb    *Sandbox
	}{
		{"exec only", 0, bx.sb},
		{"mount", syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC, bx.sb},
		{"pid", syscall.CLONE_NEWPID, bx.sb},
		{"net", syscall.CLONE_NEWNET, bx.sb},
		{"every", bx.sb.cloneMask, bx.sb},
		{"exec only/glovebox-sandbox", 0, sibling.sb},
		{"every/glovebox-sandbox", bx.sb.cloneMask, sibling.sb},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				if err := p.sb.probe(p.flags, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
