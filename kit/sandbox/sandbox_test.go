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
