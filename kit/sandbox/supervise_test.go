package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func TestOneSupervisorPerSession(t *testing.T) {
	b := newBox(t, Config{})
	if !b.sb.Report().Has(LayerPID) || !b.sb.Report().Has(LayerMount) {
		t.Skip("needs the pid and mount namespaces: ", b.sb.Report())
	}
	ss, dir := b.session(t, "a")
	if err := ss.Warm(); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	lost := ss.Lost()
	if lost == nil {
		t.Fatal("Lost() = nil after Warm, want the supervisor's end")
	}
	// Every command runs under the same pid 1, the session's supervisor,
	// and shares the session's private /tmp; another session sees neither.
	out1, _ := run(t, ss, dir, `tr '\0' ' ' </proc/1/cmdline; echo; echo one > /tmp/shared; id -u`)
	out2, _ := run(t, ss, dir, `tr '\0' ' ' </proc/1/cmdline; echo; cat /tmp/shared; id -u`)
	if !strings.HasPrefix(out1, InitName) || !strings.HasPrefix(out2, InitName) {
		t.Errorf("pid 1 of the commands' namespace: %q then %q, want %s both times", out1, out2, InitName)
	}
	if !strings.Contains(out2, "one") {
		t.Errorf("the second command does not see the first's /tmp: %q", out2)
	}
	if l1, l2 := strings.Fields(out1), strings.Fields(out2); l1[len(l1)-1] != strconv.Itoa(ss.UID()) || l2[len(l2)-1] != strconv.Itoa(ss.UID()) {
		t.Errorf("uids %q and %q, want the session's %d", out1, out2, ss.UID())
	}
	other, odir := b.session(t, "b")
	if out, _ := run(t, other, odir, `cat /tmp/shared 2>&1 || echo absent`); !strings.Contains(out, "absent") {
		t.Errorf("another session sees the first's /tmp: %q", out)
	}
	// Pid is the command's pid in the kit's namespace.
	r, w, _ := os.Pipe()
	defer r.Close()
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo up; exec sleep 100"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	// Empty for a moment while sh executes sleep.
	var cmdline []byte
	testkit.Until(t, fmt.Sprintf("a command line for pid %d", p.Pid()), func() bool {
		cmdline, _ = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
		return len(cmdline) > 0
	})
	if !strings.HasPrefix(string(cmdline), "sleep") && !strings.HasPrefix(string(cmdline), "sh") {
		t.Errorf("Pid() = %d, whose cmdline is %q, want the command", p.Pid(), cmdline)
	}
	p.Kill()
	if st, _ := p.Wait(); st.Signal != syscall.SIGKILL {
		t.Errorf("after Kill: %v, want killed by SIGKILL", st)
	}
	select {
	case <-lost:
		t.Fatal("the supervisor ended with a command")
	default:
	}
	ss.Close()
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor did not end within 10s of Close")
	}
}

// A supervisor killed under a session is replaced by the next command's.
func TestSupervisorKilledIsReplaced(t *testing.T) {
	b := newBox(t, Config{})
	if b.sb.cloneMask == 0 {
		t.Skip("no namespaces: ", b.sb.Report())
	}
	ss, dir := b.session(t, "a")
	if err := ss.Warm(); err != nil {
		t.Fatal(err)
	}
	lost := ss.Lost()
	ss.mu.Lock()
	pid := ss.sup.pid
	ss.mu.Unlock()
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() was not closed within 10s of the supervisor's death")
	}
	if out, st := run(t, ss, dir, `echo again`); out != "again\n" || st.Code != 0 {
		t.Errorf("after the supervisor died: %q, %v", out, st)
	}
}

// A command started the moment its session's supervisor was killed, before
// the kit saw it go, runs with the next supervisor: the request the dead
// one never answered is not the command's failure.
func TestStartRightAfterTheSupervisorDied(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"every layer", Config{}}, {"sandbox off", Config{Off: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBox(t, tc.cfg)
			ss, dir := b.session(t, "a")
			for i := range 5 {
				if err := ss.Warm(); err != nil {
					t.Fatal(err)
				}
				syscall.Kill(ss.SupervisorPid(), syscall.SIGKILL)
				if out, st := run(t, ss, dir, `echo again`); out != "again\n" || st.Code != 0 {
					t.Fatalf("round %d, right after the supervisor was killed: %q, %v", i, out, st)
				}
			}
		})
	}
}

// A command with a large environment starts; one beyond what a request
// can carry fails with a clear error instead of hanging.
func TestLargeEnvironment(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s")
	// Eight variables of 100 KiB (one string may not pass 128 KiB).
	env := []string{"PATH=/usr/bin:/bin"}
	for i := range 8 {
		env = append(env, fmt.Sprintf("BIG%d=%s", i, strings.Repeat("x", 100<<10)))
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", `echo $(( ${#BIG0} + ${#BIG7} ))`}, Dir: dir, Env: env, Stdout: w})
	w.Close()
	if err != nil {
		t.Fatalf("Start with 800 KiB of environment: %v", err)
	}
	out, _ := io.ReadAll(r)
	p.Wait()
	if strings.TrimSpace(string(out)) != strconv.Itoa(200<<10) {
		t.Errorf("the command saw %q, want %d", out, 200<<10)
	}
	if b.sb.cloneMask == 0 {
		return
	}
	huge := "HUGE=" + strings.Repeat("x", 8<<20)
	if _, err := ss.Start(Spec{Path: "/bin/true", Dir: dir, Env: []string{huge}}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Start with an 8 MiB variable: %v, want an error saying it is too large", err)
	}
}

// Without a pid namespace, a session's supervisor is the subreaper of
// what its commands orphan: an orphan is its child, and is reaped.
func TestSupervisorReapsOrphansWithoutPidNamespace(t *testing.T) {
	b := newBox(t, Config{NoPID: true, NoMount: true})
	if b.sb.cloneMask == 0 {
		t.Skip("no namespace, so no session supervisor: ", b.sb.Report())
	}
	ss, dir := b.session(t, "s")
	// A command that runs throughout: the one below is not the session's
	// last running command, whose end would kill what it left behind.
	keeper, err := ss.Start(Spec{Path: "/bin/sleep", Args: []string{"sleep", "60"}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer keeper.Kill()
	// The wait below matches the orphan's command line from its start (its
	// argv[0] is the marker), never the shell whose script names it.
	marker := fmt.Sprintf("orphan-%d", time.Now().UnixNano())
	if out, _ := run(t, ss, dir, fmt.Sprintf(`setsid bash -c 'exec -a %[1]s sleep 30' </dev/null >/dev/null 2>&1 &
for i in $(seq 600); do pgrep -f '^%[1]s' >/dev/null && echo forked && break; sleep 0.05; done`, marker)); out != "forked\n" {
		t.Fatalf("first command: %q", out)
	}
	sup := ss.SupervisorPid()
	// Its own session, so the end of the command's process group spares it.
	var pids []int
	testkit.Until(t, "the orphan "+marker, func() bool {
		pids = testkit.WithCmdline(marker)
		return len(pids) > 0
	})
	if len(pids) != 1 {
		t.Fatalf("orphans %v, want one", pids)
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
	if !strings.Contains(string(status), fmt.Sprintf("\nPPid:\t%d\n", sup)) {
		t.Errorf("the orphan's parent is not the session's supervisor %d:\n%s", sup, status)
	}
	// It lives until the test ends it, however slow the machine: then it
	// must be reaped, leaving no zombie.
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, fmt.Sprintf("the orphan %d to be reaped after its end", pids[0]), func() bool {
		_, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
		return err != nil
	})
}

// With the sandbox off, commands still start through the session's one
// supervisor, which forks them: the kit's binary is not executed again
// for each command, and the privileges layer holds all the same.
func TestSandboxOffCommandsForkFromOneSupervisor(t *testing.T) {
	b := newBox(t, Config{Off: true})
	ss, dir := b.session(t, "off")
	const script = `echo "ppid=$PPID"; grep -E '^(NoNewPrivs|CapEff|CapBnd):' /proc/self/status; ulimit -n; echo "fds=$(ls /proc/self/fd | tr '\n' ' ')"`
	var parents []string
	for i := range 3 {
		out, st := run(t, ss, dir, script)
		if st.Code != 0 {
			t.Fatalf("command %d: %v: %s", i, st, out)
		}
		for _, want := range []string{"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "\n4096\n", "fds=0 1 2 3 \n"} {
			if !strings.Contains(out, want) {
				t.Errorf("command %d: output lacks %q:\n%s", i, want, out)
			}
		}
		line, _, _ := strings.Cut(out, "\n")
		parents = append(parents, strings.TrimPrefix(line, "ppid="))
	}
	sup := ss.SupervisorPid()
	if sup == 0 || sup == os.Getpid() {
		t.Fatalf("SupervisorPid() = %d with the sandbox off, want a supervisor of the session's own", sup)
	}
	for i, p := range parents {
		if p != strconv.Itoa(sup) {
			t.Errorf("command %d's parent is %s, want the session's supervisor %d (parents %v)", i, p, sup, parents)
		}
	}
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", sup)); !strings.HasPrefix(string(cmdline), InitName) {
		t.Errorf("the supervisor %d runs %q, want %s", sup, cmdline, InitName)
	}
}

// TestCgroupMadeWithTheFirstSupervisor: opening a session makes no cgroup
// (an agent in the kit's own process never needs one); the first command
// makes it, and closing the session removes it.
func TestCgroupMadeWithTheFirstSupervisor(t *testing.T) {
	bx := newBox(t, Config{})
	if bx.sb.cg == nil {
		t.Skip("no cgroup layer here")
	}
	ss, dir := bx.session(t, "lazy-cgroup")
	dirs := func() (n int) {
		for _, parent := range bx.sb.cg.parents {
			if _, err := os.Stat(filepath.Join(parent, ss.id)); err == nil {
				n++
			}
		}
		return n
	}
	if n := dirs(); n != 0 {
		t.Fatalf("an opened session with no command has %d cgroup directories, want none", n)
	}
	if out, st := run(t, ss, dir, "echo ran"); st.Code != 0 || out != "ran\n" {
		t.Fatalf("the first command: %q, %v", out, st)
	}
	if n, want := dirs(), len(bx.sb.cg.parents); n != want {
		t.Fatalf("after the first command the session has %d cgroup directories, want %d", n, want)
	}
	ss.Close()
	if n := dirs(); n != 0 {
		t.Errorf("a closed session left %d cgroup directories", n)
	}
}

// TestCommandsMakeGroupWritableFiles: a session's commands run with umask
// 0002, so that what they make the kit can change through the session
// directory's group (ACP's fs/write_text_file on a file the agent made),
// with privileges separated or not.
func TestCommandsMakeGroupWritableFiles(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "umask")
	out, st := run(t, ss, dir, "umask; touch made && stat -c %a made")
	if st.Code != 0 || out != "0002\n664\n" {
		t.Errorf("umask and a new file's mode = %q (exit %d), want 0002 and 664", out, st.Code)
	}
}
