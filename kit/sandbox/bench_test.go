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
// "session, then KillAll" adds what the exec agent does after every
// command: end whatever the command left in the session.
func BenchmarkCommand(b *testing.B) {
	b.Run("floor", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, killAll := range []bool{false, true} {
		name := "session"
		if killAll {
			name = "session, then KillAll"
		}
		b.Run(name, func(b *testing.B) {
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
				if killAll {
					ss.KillAll()
				}
			}
		})
	}
}

// BenchmarkProbe is the namespace probe New makes at boot: a supervisor
// started in every namespace, set up, and gone.
func BenchmarkProbe(b *testing.B) {
	bx := newBox(b, Config{})
	for _, p := range []struct {
		name  string
		flags uintptr
	}{
		{"exec only", 0},
		{"mount", syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC},
		{"pid", syscall.CLONE_NEWPID},
		{"net", syscall.CLONE_NEWNET},
		{"every", bx.sb.cloneMask},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				if err := bx.sb.probe(p.flags, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
