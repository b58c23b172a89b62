//go:build linux

package sandbox

import (
	"os/exec"
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
