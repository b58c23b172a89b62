//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// box is a sandbox with two sessions' directories laid out as the kit lays
// them out: <root>/work/<id>, <root>/state.
type box struct {
	root, state, parent string
	sb                  *Sandbox
}

func newBox(t testing.TB, cfg Config) *box {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, as the kit runs in its image")
	}
	// Not under /tmp: each sandbox has a private /tmp.
	root, err := os.MkdirTemp("/var/tmp", "sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &box{root: root, state: filepath.Join(root, "state"), parent: filepath.Join(root, "work")}
	for _, d := range []string{b.state, b.parent} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b.state, "secret"), []byte("box key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Hide = append(cfg.Hide, b.state, b.parent)
	b.sb, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *box) session(t testing.TB, id string) (*Session, string) {
	t.Helper()
	// Session ids name cgroups, which other tests' kits share a parent
	// with: unique, as the kit's own ids are.
	id = fmt.Sprintf("%s-%d-%d", id, os.Getpid(), time.Now().UnixNano())
	dir := filepath.Join(b.parent, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ss, err := b.sb.Open(id, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return ss, dir
}

// run runs a shell command in ss and returns its output and status,
// failing the test if it does not end within 20s.
func run(t *testing.T, ss *Session, dir, script string) (string, ExitStatus) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := ss.Start(Spec{
		Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir},
		Stdout: w, Stderr: w,
	})
	w.Close()
	if err != nil {
		t.Fatalf("Start(%q): %v", script, err)
	}
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); out <- b }()
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		p.Kill()
		t.Fatalf("%q did not end within 20s", script)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait(%q): %v", script, err)
	}
	select {
	case b := <-out:
		return string(b), st
	case <-time.After(10 * time.Second):
		t.Fatalf("the output of %q did not close within 10s of its end", script)
	}
	return "", st
}

func TestReportAsRoot(t *testing.T) {
	b := newBox(t, Config{})
	r := b.sb.Report()
	for _, l := range []string{LayerUsers, LayerPrivileges, LayerMount, LayerPID, LayerNetwork, LayerCgroup} {
		if !r.Has(l) {
			t.Errorf("layer %s not in force as root: %s", l, r)
		}
	}
	if !strings.HasPrefix(r.String(), "sandbox: users, privileges, mount, pid, network, cgroup") {
		t.Errorf("String() = %q", r.String())
	}
}

func TestReportOff(t *testing.T) {
	b := newBox(t, Config{Off: true})
	r := b.sb.Report()
	if r.Has(LayerUsers) || r.Has(LayerMount) || !r.Has(LayerPrivileges) {
		t.Errorf("Off: Active = %v", r.Active)
	}
	if r.Inactive[LayerMount] == "" || !strings.Contains(r.String(), "not in force: cgroup") {
		t.Errorf("Off: the report does not say what is off: %s", r)
	}
}

func TestIdentityAndPrivileges(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s1")
	out, st := run(t, ss, dir, `id -u; id -g; id -G; grep -E '^(NoNewPrivs|CapEff|CapBnd|CapPrm):' /proc/self/status; ulimit -n; stat -c %u:%a .; echo "name=$(id -un) group=$(id -gn)"; touch /etc/passwd 2>/dev/null || echo passwd-read-only; echo "fds=$(ls /proc/self/fd | tr '\n' ' ')"`)
	if st.Code != 0 {
		t.Fatalf("exit %v: %s", st, out)
	}
	uid := strconv.Itoa(ss.UID())
	for _, want := range []string{
		uid + "\n" + uid + "\n" + uid + "\n",
		"NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapPrm:\t0000000000000000",
		"\n4096\n", uid + ":700",
		"name=session group=session", "passwd-read-only",
		"fds=0 1 2 3 \n", // ls's own directory is 3: no pipe to the kit reaches the command
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if ss.UID() < DefaultUIDBase {
		t.Errorf("UID() = %d, want one from %d", ss.UID(), DefaultUIDBase)
	}
}

func TestSessionsCannotSeeEachOtherOrTheState(t *testing.T) {
	b := newBox(t, Config{})
	victim, vdir := b.session(t, "victim")
	if err := os.WriteFile(filepath.Join(vdir, "private.txt"), []byte("victim data"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = victim
	attacker, adir := b.session(t, "attacker")
	script := fmt.Sprintf(`
		ls -a %[1]s; echo "--"
		cat %[2]s/private.txt; echo "rc=$?"
		echo planted > %[2]s/planted.txt; echo "rc=$?"
		ls -a %[3]s; cat %[3]s/secret; echo "rc=$?"
		touch /usr/glovebox-test; echo "rc=$?"
		echo mine > %[4]s/mine.txt && cat %[4]s/mine.txt
		echo t > /tmp/t && cat /tmp/t`, b.parent, vdir, b.state, adir)
	out, _ := run(t, attacker, adir, script)
	listing, rest, _ := strings.Cut(out, "--")
	if strings.Contains(listing, "victim") {
		t.Errorf("the attacker lists the victim's directory:\n%s", out)
	}
	if strings.Contains(rest, "victim data") || strings.Contains(rest, "box key") {
		t.Errorf("the attacker read what it must not:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(vdir, "planted.txt")); err == nil {
		t.Errorf("the attacker planted a file in the victim's directory")
	}
	if strings.Count(rest, "rc=0") != 0 {
		t.Errorf("an attack succeeded (rc=0):\n%s", out)
	}
	if !strings.Contains(rest, "mine\nt\n") {
		t.Errorf("the session cannot use its own directory and /tmp:\n%s", out)
	}
}

func TestWithoutMountNamespaceModesStillSeparateSessions(t *testing.T) {
	b := newBox(t, Config{NoMount: true, NoPID: true})
	if b.sb.Report().Has(LayerMount) {
		t.Fatal("mount layer on")
	}
	_, vdir := b.session(t, "victim")
	os.WriteFile(filepath.Join(vdir, "private.txt"), []byte("victim data"), 0o600)
	attacker, adir := b.session(t, "attacker")
	out, _ := run(t, attacker, adir, fmt.Sprintf(`ls %s; cat %s/private.txt; cat %s/secret; echo done`, b.parent, vdir, b.state))
	if strings.Contains(out, "victim data") || strings.Contains(out, "box key") || strings.Contains(out, "victim\n") {
		t.Errorf("without a mount namespace the attacker still reached another session or the state:\n%s", out)
	}
}

func TestPidNamespaceHidesTheKit(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s")
	out, _ := run(t, ss, dir, fmt.Sprintf(`kill -0 %d; echo "rc=$?"; ls /proc | grep -c '^[0-9]'`, os.Getpid()))
	if !strings.Contains(out, "rc=1") {
		t.Errorf("the sandbox can signal the kit:\n%s", out)
	}
	lines := strings.Fields(out)
	if n, _ := strconv.Atoi(lines[len(lines)-1]); n == 0 || n > 5 {
		t.Errorf("the sandbox sees %d processes, want only its own few:\n%s", n, out)
	}
}

func TestNoNetworkButLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("reached\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s")
	out, _ := run(t, ss, dir, fmt.Sprintf(`cat /proc/net/dev | tail -n +3 | cut -d: -f1; bash -c 'cat < /dev/tcp/127.0.0.1/%d'; echo "rc=$?"`, port))
	if strings.Contains(out, "reached") {
		t.Errorf("the sandbox reached the host's loopback:\n%s", out)
	}
	if ifs := strings.Fields(strings.Split(out, "bash")[0]); len(ifs) == 0 || ifs[0] != "lo" {
		t.Errorf("interfaces = %q, want only lo", out)
	}
}

func TestEgressListenerIsTheWayOut(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s")
	got := make(chan string, 1)
	ss.OnListener = func(ln net.Listener) {
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := io.ReadAll(io.LimitReader(c, 64))
			got <- string(line)
			c.Close()
		}()
	}
	out, st := run(t, ss, dir, `bash -c 'echo hello-proxy > /dev/tcp/127.0.0.1/3128' && echo sent`)
	if st.Code != 0 {
		t.Fatalf("exit %v: %s", st, out)
	}
	select {
	case line := <-got:
		if line != "hello-proxy\n" {
			t.Errorf("the kit's side read %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the kit's side of the egress listener got nothing within 10s")
	}
}

func TestNothingOutlivesTheCommand(t *testing.T) {
	for _, cfg := range []struct {
		name string
		cfg  Config
	}{{"pid namespace", Config{}}, {"cgroup only", Config{NoPID: true, NoMount: true}}, {"uid only", Config{NoPID: true, NoMount: true, NoCgroup: true, UIDBase: 300000 + os.Getpid()%100000}},
		// As a non-root kit in a container: no namespace, uid or cgroup
		// finds the survivor; the supervisor does, by its ancestry, when
		// the session's last command ends (no KillAll).
		{"ancestry only", Config{NoUsers: true, NoPID: true, NoMount: true, NoNetwork: true, NoCgroup: true}}} {
		t.Run(cfg.name, func(t *testing.T) {
			b := newBox(t, cfg.cfg)
			ss, dir := b.session(t, "s")
			marker := fmt.Sprintf("sandbox-survivor-%d", time.Now().UnixNano())
			out, _ := run(t, ss, dir, fmt.Sprintf(`setsid bash -c 'exec -a %[1]s sleep 1000' </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do pgrep -f '^%[1]s' >/dev/null && echo started && break; sleep 0.1; done`, marker))
			if out != "started\n" {
				t.Fatalf("the survivor did not start: %q", out)
			}
			if !b.sb.Report().Has(LayerPID) && cfg.name != "ancestry only" {
				ss.KillAll()
			}
			if pids := testkit.WithCmdline(marker); len(pids) > 0 {
				t.Errorf("a setsid process outlived the command: pids %v", pids)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	b := newBox(t, Config{Limits: Limits{Memory: 64 << 20}})
	if !b.sb.Report().Has(LayerCgroup) {
		t.Skip("no cgroup here: ", b.sb.Report())
	}
	ss, dir := b.session(t, "s")
	out, st := run(t, ss, dir, `head -c 400000000 /dev/zero | tail -c 300000000 >/dev/null; echo "rc=$?"`)
	if st.Limit != "memory" {
		t.Errorf("status %v, want the memory limit named; output:\n%s", st, out)
	}
	// The session still works after.
	if out, _ := run(t, ss, dir, `echo ok`); out != "ok\n" {
		t.Errorf("after the OOM kill: %q", out)
	}
}

// TestForkLimit forks sleeps until the pids limit stops the loop (the
// shell dies when a fork fails); none may outlive the command. The sleeps
// carry a mark of this test's own in their environment, so the check finds
// exactly them, never another test's processes on the machine (a parallel
// go test ./... runs many).
func TestForkLimit(t *testing.T) {
	// A uid range of its own: RLIMIT_NPROC, the backstop under the cgroup,
	// counts every process of the uid on the machine, and other tests'
	// sessions (the default range's first uid) would make it refuse first,
	// uncounted by the cgroup.
	b := newBox(t, Config{Limits: Limits{Pids: 32}, UIDBase: 300000 + os.Getpid()%100000})
	ss, dir := b.session(t, "s")
	mark := fmt.Sprintf("GLOVEBOX_FORK_TEST=%d-%d", os.Getpid(), time.Now().UnixNano())

	// First, under the limit, the mark is seen on live sleeps: the check
	// after the fork loop would see them too. The command holds on its
	// stdin until they have been seen.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	script := `for i in 1 2 3 4 5; do sleep 30 & done; echo made; read _`
	p, err := ss.Start(Spec{
		Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
		Env:   []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, mark},
		Stdin: inR, Stdout: outW, Stderr: outW,
	})
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatalf("Start(%q): %v", script, err)
	}
	defer p.Kill()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(outR).ReadString('\n')
		lines <- line
	}()
	if made := testkit.Recv(t, lines, "five sleeps started"); made != "made\n" {
		t.Fatalf("%q printed %q, want \"made\"", script, made)
	}
	// A process's environment cannot be read while it execs: polled.
	testkit.Until(t, "the shell and its five sleeps seen with "+mark, func() bool { return len(testkit.WithEnv(mark)) == 6 })
	inW.Close()
	testkit.Wait(t, p.Done(), "the five sleeps' command to end after its stdin closed")
	if pids := testkit.WithEnv(mark); len(pids) > 0 {
		t.Fatalf("%d sleeps outlived their command: pids %v", len(pids), pids)
	}

	out, st := run(t, ss, dir, "export "+mark+`; i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; echo "made $i"`)
	if b.sb.Report().Has(LayerCgroup) && st.Limit != "pids" {
		t.Errorf("status %v, want the pids limit named; output:\n%s", st, out)
	}
	if pids := testkit.WithEnv(mark); len(pids) > 0 {
		t.Errorf("%d sleeps outlived the fork loop: pids %v", len(pids), pids)
	}
}

func TestSignalReachesEverything(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s")
	r, w, _ := os.Pipe()
	defer r.Close()
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "trap 'echo got-term; exit 3' TERM; echo up; while :; do sleep 0.05; done"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); p.Kill() }()
	p.Stop(10 * time.Second)
	st, _ := p.Wait()
	rest, _ := io.ReadAll(r)
	if st.Code != 3 || !strings.Contains(string(rest), "got-term") {
		t.Errorf("after Stop: status %v, output %q; want the trap to run and exit 3", st, rest)
	}
}

func TestStartErrors(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "s")
	if _, err := ss.Start(Spec{Path: "no-such-program-here", Dir: dir, Env: []string{"PATH=/usr/bin"}}); err == nil || !strings.Contains(err.Error(), "not found in PATH") {
		t.Errorf("missing program: err = %v", err)
	}
	if _, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh"}, Dir: "/nonexistent-dir"}); err == nil || !strings.Contains(err.Error(), "chdir") && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("bad dir: err = %v", err)
	}
	ss.Close()
	if _, err := ss.Start(Spec{Path: "/bin/true", Dir: dir}); err == nil {
		t.Errorf("Start after Close succeeded")
	}
}

func TestSignalName(t *testing.T) {
	tests := []struct {
		sig  int
		want string
	}{
		{9, "SIGKILL"},
		{15, "SIGTERM"},
		{2, "SIGINT"},
		{64, "SIG64"},
	}
	for _, tt := range tests {
		if got := SignalName(syscall.Signal(tt.sig)); got != tt.want {
			t.Errorf("SignalName(%d) = %q, want %q", tt.sig, got, tt.want)
		}
	}
}

// TestUserNamespaceWithoutRoot runs the sandbox as a kit that is not
// root would: this test binary again, as nobody. There the sandbox must
// map the kit's uid to root inside a user namespace, with no
// capabilities, and still hide what it hides.
func TestUserNamespaceWithoutRoot(t *testing.T) {
	if os.Getenv("SANDBOX_TEST_AS_NOBODY") == "1" {
		userNSChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to become nobody")
	}
	dir, err := os.MkdirTemp("/var/tmp", "sandbox-userns-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	self, _ := os.Executable()
	bin := filepath.Join(dir, "sandbox.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestUserNamespaceWithoutRoot$", "-test.v")
	cmd.Env = []string{"SANDBOX_TEST_AS_NOBODY=1", "SANDBOX_TEST_DIR=" + dir, "PATH=/usr/bin:/bin", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
}

func userNSChild(t *testing.T) {
	dir := os.Getenv("SANDBOX_TEST_DIR")
	state := filepath.Join(dir, "state")
	parent := filepath.Join(dir, "work")
	own := filepath.Join(parent, "mine")
	for _, d := range []string{state, own, filepath.Join(parent, "other")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(state, "secret"), []byte("box key"), 0o600)
	sb, err := New(Config{Hide: []string{state, parent}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := sb.Report()
	t.Log(r.String())
	for _, l := range []string{LayerUserNS, LayerPrivileges, LayerMount, LayerPID, LayerNetwork} {
		if !r.Has(l) {
			t.Errorf("layer %s not in force without root: %s", l, r)
		}
	}
	if r.Has(LayerUsers) || r.Inactive[LayerUsers] == "" || r.Inactive[LayerCgroup] == "" {
		t.Errorf("without root the report must say users and cgroup are off: %s", r)
	}
	ss, err := sb.Open("mine", []string{own})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	out, st := run(t, ss, own, fmt.Sprintf(`id -u; grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status; ls %s; cat %s/secret; echo written-ok > %s/f && cat %s/f`, parent, state, own, own))
	if st.Code != 0 {
		t.Fatalf("exit %v: %s", st, out)
	}
	for _, want := range []string{"0\n", "CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "written-ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "other") || strings.Contains(out, "box key") {
		t.Errorf("a sandbox without root saw what it must not:\n%s", out)
	}
}

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
