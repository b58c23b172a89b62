//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
// started in every namespace, set up, and gone. The "glovebox-sandbox"
// runs start cmd/glovebox-sandbox (built for the benchmark) instead of
// re-executing the test binary; the "glovebox-kit" run starts the kit's
// binary (built for the benchmark, installed under the sibling's name),
// as a kit without the sibling re-executes itself. child-cpu-ms/op is the
// CPU time the supervisors used, which the machine's other load does not
// inflate as it does the wall time.
func BenchmarkProbe(b *testing.B) {
	bx := newBox(b, Config{})
	sibling, _ := boxWith(b, Config{}, supervisorDir(b))
	if sibling.sb.Supervisor() == "" {
		b.Fatal("the sibling glovebox-sandbox is not used")
	}
	kitDir := b.TempDir()
	if err := os.Chmod(kitDir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := goBuildTB(b, "-o", filepath.Join(kitDir, SupervisorName), "github.com/glovebox-dev/glovebox/cmd/glovebox-kit"); err != nil {
		b.Fatal(err)
	}
	asKit, _ := boxWith(b, Config{}, kitDir)
	if asKit.sb.Supervisor() == "" {
		b.Fatal("the kit's binary is not used as supervisor")
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
		{"exec only/glovebox-kit", 0, asKit.sb},
		{"every/glovebox-kit", bx.sb.cloneMask, asKit.sb},
	} {
		b.Run(p.name, func(b *testing.B) {
			cpu0 := childCPU()
			for b.Loop() {
				if err := p.sb.probe(p.flags, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(childCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "child-cpu-ms/op")
		})
	}
}

// childCPU is the user and system time of this process's waited-for
// children so far.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// goBuildTB runs go build with args, within 5 minutes.
func goBuildTB(tb testing.TB, args ...string) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v (within 5m): %w\n%s", args, err, out)
	}
	return nil
}

// BenchmarkFirstCommand is a session's first command, `sh -c true`:
// open, start the session's supervisor, run, close. "landlock+seccomp"
// has the supervisor build its ruleset and filter and apply them; "none"
// is the same sandbox with both off: the difference is what they add to a
// session's first command (later commands inherit them, at no cost). Run
// with the Docker-like configuration (no namespace, no uid) and with
// every layer. child-cpu-ms/op is the CPU time the supervisors and
// commands used (see BenchmarkProbe).
func BenchmarkFirstCommand(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{{"docker-like", dockerLike}, {"every layer", Config{}}} {
		for _, enforce := range []bool{false, true} {
			name := c.name + "/landlock+seccomp"
			if !enforce {
				name = c.name + "/none"
			}
			b.Run(name, func(b *testing.B) {
				bx := newBox(b, c.cfg)
				if !enforce {
					bx.sb.landlock, bx.sb.seccomp = 0, false
				} else if !bx.sb.Report().Has(LayerLandlock) || !bx.sb.Report().Has(LayerSeccomp) {
					b.Skip("landlock and seccomp not in force: ", bx.sb.Report())
				}
				i := 0
				cpu0 := childCPU()
				for b.Loop() {
					i++
					id := fmt.Sprintf("first-%d-%d", os.Getpid(), i)
					dir := filepath.Join(bx.parent, id)
					if err := os.Mkdir(dir, 0o755); err != nil {
						b.Fatal(err)
					}
					ss, err := bx.sb.Open(id, []string{dir})
					if err != nil {
						b.Fatal(err)
					}
					p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
					if err != nil {
						b.Fatal(err)
					}
					if st, _ := p.Wait(); st.Code != 0 {
						b.Fatal(st)
					}
					ss.Close()
					os.RemoveAll(dir)
				}
				b.ReportMetric(float64(childCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "child-cpu-ms/op")
			})
		}
	}
}

// BenchmarkEnforceSetup is what a supervisor computes for its Landlock
// ruleset (the walk of the hidden paths' ancestors) and its seccomp
// filter, without applying them, and the probe New makes at boot for
// both (a supervisor that applies them and exits).
func BenchmarkEnforceSetup(b *testing.B) {
	bx := newBox(b, dockerLike)
	spec := &landlockSpec{ABI: landlockMaxABI, Hide: bx.sb.cfg.Hide, RW: []string{bx.parent + "/s"}}
	b.Run("landlock rules", func(b *testing.B) {
		for b.Loop() {
			landlockRules(spec)
		}
		b.ReportMetric(float64(len(landlockRules(spec))), "rules")
	})
	b.Run("boot probe", func(b *testing.B) {
		for b.Loop() {
			bx.sb.probeEnforce(func(layer, why string) { b.Fatalf("%s: %s", layer, why) })
		}
	})
	b.Run("seccomp filter", func(b *testing.B) {
		for b.Loop() {
			if _, err := seccompFilter(seccompNative, refusedSyscalls, seccompOptions{Confined: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
