//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// A warm session's supervisor is counted ready only once it waits for
// its first request with everything set up: its 4 MiB receive buffer is
// already mapped (outside the Go heap) when Warm returns, so the first
// command waits for neither that nor the garbage collection a heap
// buffer of that size would start.
func TestWarmSupervisorIsReadyBeforeItSaysSo(t *testing.T) {
	b := newBox(t, Config{})
	ss, _ := b.session(t, "ready")
	if err := ss.Warm(); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	pid := ss.SupervisorPid()
	if pid == 0 {
		t.Fatal("SupervisorPid() = 0 after Warm")
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	if !hasMapping(string(maps), maxCtlMsg) {
		t.Errorf("the supervisor's maps, right after Warm, hold no anonymous mapping of %d bytes (its receive buffer):\n%s", maxCtlMsg, maps)
	}
}

// hasMapping reports whether maps (a /proc/PID/maps) holds an anonymous
// read-write private mapping of exactly size bytes.
func hasMapping(maps string, size uint64) bool {
	for line := range strings.Lines(maps) {
		f := strings.Fields(line)
		if len(f) != 5 || f[1] != "rw-p" {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err == nil && hi-lo == size {
			return true
		}
	}
	return false
}

// requests is how many start and killall requests the session's
// supervisor was sent.
func requests(ss *Session) uint64 {
	ss.mu.Lock()
	sp := ss.sup
	ss.mu.Unlock()
	if sp == nil {
		return 0
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.sent
}

// A command costs one request to the supervisor: KillAll after it (as the
// exec agent calls it after every command) needs no killall round trip
// when the command's exit said the pid namespace was emptied. With a
// command still running, or one started since, it still kills everything,
// setsid escapees included.
func TestKillAllAfterACommandCostsNoRoundTrip(t *testing.T) {
	b := newBox(t, Config{})
	if !b.sb.Report().Has(LayerPID) {
		t.Skip("needs the pid namespace: ", b.sb.Report())
	}
	ss, dir := b.session(t, "rt")
	if err := ss.Warm(); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	ss.KillAll()
	if n := requests(ss); n != 0 {
		t.Errorf("KillAll on a fresh supervisor sent %d requests, want 0", n)
	}
	marker := fmt.Sprintf("sandbox-escapee-%d", time.Now().UnixNano())
	escape := fmt.Sprintf(`setsid bash -c 'exec -a %[1]s sleep 1000' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do pgrep -f '^%[1]s' >/dev/null && echo started && break; sleep 0.1; done`, marker)
	if out, _ := run(t, ss, dir, escape); out != "started\n" {
		t.Fatalf("the escapee did not start: %q", out)
	}
	ss.KillAll()
	if n := requests(ss); n != 1 {
		t.Errorf("a command and KillAll sent %d requests, want 1 (the start)", n)
	}
	if pids := testkit.WithCmdline(marker); len(pids) > 0 {
		t.Errorf("a setsid process outlived its command: pids %v", pids)
	}

	// A command still running: KillAll asks the supervisor, and nothing
	// of the command is left.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", escape + "\nsleep 1000"}, Dir: dir,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, Stdout: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(r).ReadString('\n'); line != "started\n" {
		t.Fatalf("the escapee did not start: %q, %v", line, err)
	}
	before := requests(ss)
	// Not through the Process: the session's KillAll alone must find
	// the command and the escapee.
	ss.mu.Lock()
	delete(ss.procs, p)
	ss.mu.Unlock()
	ss.KillAll()
	if n := requests(ss) - before; n != 1 {
		t.Errorf("KillAll with a command running sent %d requests, want 1 (killall)", n)
	}
	if st, _ := p.Wait(); st.Signal != syscall.SIGKILL {
		t.Errorf("the running command after KillAll: %v, want killed by SIGKILL", st)
	}
	if pids := testkit.WithCmdline(marker); len(pids) > 0 {
		t.Errorf("a setsid process outlived KillAll: pids %v", pids)
	}
}

// A command starts from the cgroup's counters as read after the last
// command's exit, or, for a warm session's first command, as read when
// its supervisor started, when the namespace stayed empty since: a limit
// hit is named for the command that hit it, the first one included, and
// never for the next one.
func TestLimitNamedForTheCommandThatHitIt(t *testing.T) {
	b := newBox(t, Config{Limits: Limits{Memory: 64 << 20, Pids: 32}})
	if !b.sb.Report().Has(LayerCgroup) || !b.sb.Report().Has(LayerPID) {
		t.Skip("needs the cgroup and the pid namespace: ", b.sb.Report())
	}
	ss, dir := b.session(t, "limits")
	if err := ss.Warm(); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	for _, c := range []struct{ limit, script string }{
		{"memory", `head -c 400000000 /dev/zero | tail -c 300000000 >/dev/null`},
		{"pids", `i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null`},
	} {
		if out, st := run(t, ss, dir, c.script); st.Limit != c.limit {
			t.Errorf("%s: status %v, want the %s limit named; output:\n%s", c.limit, st, c.limit, out)
		}
		for i := range 2 {
			if out, st := run(t, ss, dir, `echo ok`); out != "ok\n" || st.Limit != "" || st.Code != 0 {
				t.Errorf("command %d after the %s limit: %q, %v, want ok and no limit", i+1, c.limit, out, st)
			}
		}
	}
}
