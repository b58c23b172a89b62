//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dockerLike is the configuration of a container with Docker's default
// capabilities and seccomp profile: no namespace, no mount.
var dockerLike = Config{NoUsers: true, NoMount: true, NoPID: true, NoNetwork: true}

// newBoxIn is newBox for any user: the box's directories under root.
func newBoxIn(t *testing.T, root string, cfg Config) *box {
	t.Helper()
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
	cfg.TmpRoot = filepath.Join(b.state, "tmp")
	var err error
	b.sb, err = New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startVictim starts a long command in a session of b that holds a secret
// in its environment and a private file in its directory, and returns the
// command's pid and the directory.
func startVictim(t *testing.T, b *box) (int, string) {
	t.Helper()
	ss, dir := b.session(t, "victim")
	if err := os.WriteFile(filepath.Join(dir, "private.txt"), []byte("victim data"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := ss.Start(Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo up; exec sleep 60"}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "VICTIM_SECRET=victim-token"}, Stdout: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); p.Wait() })
	if _, err := io.ReadFull(r, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	// The shell has executed sleep once the command line says so.
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid()))
		if strings.HasPrefix(string(b), "sleep") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the victim's command %d did not execute sleep within 20s", p.Pid())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p.Pid(), dir
}

// attackScript is what a hostile prompt tries in its session: every line
// that succeeds prints a word in capitals.
func attackScript(b *box, victimDir string, victimPid int) string {
	return fmt.Sprintf(`
ls %[1]s 2>/dev/null | grep -q victim && echo LISTED-SESSIONS
ls %[2]s >/dev/null 2>&1 && echo LISTED-VICTIM
cat %[2]s/private.txt 2>/dev/null
echo planted 2>/dev/null > %[2]s/planted.txt && echo PLANTED
ls %[3]s 2>/dev/null | grep -q secret && echo LISTED-STATE
cat %[3]s/secret 2>/dev/null
tr '\0' '\n' < /proc/%[4]d/environ 2>/dev/null | grep -q . && echo READ-KIT-ENVIRON
tr '\0' '\n' < /proc/%[5]d/environ 2>/dev/null
(exec 3</proc/%[5]d/mem) 2>/dev/null && echo OPENED-VICTIM-MEM
(exec 3<>/proc/$PPID/mem) 2>/dev/null && echo OPENED-SUPERVISOR-MEM
perl -e 'exit(syscall(%[6]d, 16, %[5]d, 0, 0) == 0 ? 0 : 1)' && echo PTRACED
unshare -U true 2>/dev/null && echo USERNS
unshare -U -r true 2>/dev/null && echo USERNS-ROOT
perl -e 'exit(syscall(%[7]d, 0x10000000) == 0 ? 0 : 1)' && echo UNSHARED
perl -MSocket -e 'socket(my $s, AF_INET, SOCK_RAW, 1) ? exit 0 : exit 1' && echo RAW-SOCKET
perl -MSocket -e 'socket(my $s, 17, SOCK_RAW, 0) ? exit 0 : exit 1' && echo PACKET-SOCKET
kill -0 %[4]d 2>/dev/null && echo SIGNALLED-KIT
kill -CONT %[4]d 2>/dev/null && echo SIGNALLED-KIT
echo mine > mine.txt && cat mine.txt
echo t > "${TMPDIR:-/tmp}/t" && cat "${TMPDIR:-/tmp}/t"
echo attack-done`, b.parent, victimDir, b.state, os.Getpid(), victimPid, unix.SYS_PTRACE, unix.SYS_UNSHARE)
}

var attackLeaks = []string{"LISTED-SESSIONS", "LISTED-VICTIM", "victim data", "PLANTED", "LISTED-STATE", "box key",
	"READ-KIT-ENVIRON", "victim-token", "OPENED-VICTIM-MEM", "OPENED-SUPERVISOR-MEM", "PTRACED", "USERNS", "UNSHARED", "RAW-SOCKET", "PACKET-SOCKET", "SIGNALLED-KIT"}

// checkAttack runs the attack in a new session of b and fails the test on
// every leak.
func checkAttack(t *testing.T, b *box) {
	t.Helper()
	r := b.sb.Report()
	if !r.Has(LayerLandlock) || !r.Has(LayerSeccomp) {
		t.Fatalf("landlock and seccomp not in force: %s", r)
	}
	if r.Separation() != "" {
		t.Errorf("Separation() = %q with Landlock in force", r.Separation())
	}
	vpid, vdir := startVictim(t, b)
	ss, dir := b.session(t, "attacker")
	out, _ := run(t, ss, dir, attackScript(b, vdir, vpid))
	if !strings.Contains(out, "attack-done") {
		t.Fatalf("the attack did not run to its end:\n%s", out)
	}
	for _, leak := range attackLeaks {
		if leak == "SIGNALLED-KIT" && r.Landlock < 6 {
			continue
		}
		if strings.Contains(out, leak) {
			t.Errorf("the attack got %s (%s):\n%s", leak, r, out)
		}
	}
	if _, err := os.Stat(filepath.Join(vdir, "planted.txt")); err == nil {
		t.Errorf("the attacker planted a file in the victim's directory")
	}
	if !strings.Contains(out, "mine\nt\n") {
		t.Errorf("the session cannot use its own directory and TMPDIR:\n%s", out)
	}
}

// TestEnforceDockerLike: as root with no namespace and no uid per session
// (Docker's defaults), Landlock and seccomp keep sessions apart, the kit
// and its state out of reach, and refuse what the filter refuses. With
// both off, the same attack reads the victim's files and makes a user
// namespace.
func TestEnforceDockerLike(t *testing.T) {
	b := newBox(t, Config{})
	root := b.root
	b = newBoxIn(t, filepath.Join(root, "docker"), dockerLike)
	checkAttack(t, b)
	// The command's standard files, reopened through /proc (a pipe of
	// the kit's, which the session's uid may open here).
	ss, dir := b.session(t, "stdio")
	if out, _ := run(t, ss, dir, `echo via-stdout > /dev/stdout; ls /dev/fd/ >/dev/null && echo fds-listed`); out != "via-stdout\nfds-listed\n" {
		t.Errorf("/dev/stdout and /dev/fd: %q", out)
	}

	t.Run("layers off", func(t *testing.T) {
		off := newBoxIn(t, filepath.Join(root, "off"), dockerLike)
		off.sb.landlock, off.sb.seccomp = 0, false
		vpid, vdir := startVictim(t, off)
		ss, dir := off.session(t, "attacker")
		out, _ := run(t, ss, dir, attackScript(off, vdir, vpid))
		for _, leak := range []string{"victim data", "box key", "victim-token", "USERNS", "PACKET-SOCKET" /* EPERM, not EAFNOSUPPORT, without the filter: see below */} {
			if leak == "PACKET-SOCKET" {
				continue
			}
			if !strings.Contains(out, leak) {
				t.Errorf("without landlock and seccomp the attack did not get %s; the test proves nothing:\n%s", leak, out)
			}
		}
	})
}

// TestEnforceReportOff: with the sandbox off, the seccomp filter is in
// force (as no_new_privs is) and Landlock is not, and says why.
func TestEnforceReportOff(t *testing.T) {
	b := newBox(t, Config{Off: true})
	r := b.sb.Report()
	if !r.Has(LayerSeccomp) || r.Has(LayerLandlock) || r.Inactive[LayerLandlock] == "" || r.Landlock != 0 || r.ConfinesEgress() {
		t.Errorf("Off: %s (Landlock %d)", r, r.Landlock)
	}
	ss, dir := b.session(t, "off")
	if out, _ := run(t, ss, dir, `grep Seccomp: /proc/self/status; unshare -U true 2>/dev/null && echo USERNS`); out != "Seccomp:\t2\n" {
		t.Errorf("a command with the sandbox off: %q, want the filter in force", out)
	}
}

// TestEnforceFullSandbox: Landlock and seccomp hold in the full sandbox
// too, as defense in depth, and what programs need still works: /tmp,
// /dev/shm, devices, threads (xz -T2 starts them with clone3, refused
// with ENOSYS, then with clone).
func TestEnforceFullSandbox(t *testing.T) {
	b := newBox(t, Config{})
	r := b.sb.Report()
	if !r.Has(LayerLandlock) || !r.Has(LayerSeccomp) || r.Landlock < 1 {
		t.Fatalf("landlock and seccomp not in force as root: %s", r)
	}
	ss, dir := b.session(t, "s")
	script := fmt.Sprintf(`unshare -U true 2>/dev/null && echo USERNS; ls / >/dev/null && echo root-listed; echo x > /tmp/x && cat /tmp/x; echo y > /dev/shm/y && cat /dev/shm/y; echo z > /dev/null && echo null-ok; ls /usr/bin >/dev/null && echo usr-ok; head -c1 /proc/self/status >/dev/null && echo proc-ok; grep Seccomp: /proc/self/status
perl -e 'syscall(%d, 0, 0); print "clone3 errno ", $!+0, "\n"'
head -c 3000000 /dev/zero | xz -T2 -0 -c | xz -dc | wc -c`, unix.SYS_CLONE3)
	out, _ := run(t, ss, dir, script)
	for _, want := range []string{"root-listed", "x\n", "y\n", "null-ok", "usr-ok", "proc-ok", "Seccomp:\t2", fmt.Sprintf("clone3 errno %d\n", syscall.ENOSYS), "\n3000000\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "USERNS") {
		t.Errorf("a user namespace was made:\n%s", out)
	}
}

// TestEnforceEgress: a session confined to its egress port (ConfineNet,
// no network namespace) connects to that port only, over TCP: another
// loopback listener, UDP and TCP Fast Open (which connects without
// connect(2)) are refused.
func TestEnforceEgress(t *testing.T) {
	b := newBox(t, Config{})
	checkEgress(t, newBoxIn(t, filepath.Join(b.root, "egress"), dockerLike))
}

// checkEgress runs TestEnforceEgress's checks in b, a sandbox with no
// network namespace.
func checkEgress(t *testing.T, b *box) {
	t.Helper()
	r := b.sb.Report()
	if r.Landlock < 4 {
		t.Skip("Landlock's TCP rules need ABI 4: ", r)
	}
	if !r.ConfinesEgress() {
		t.Fatalf("ConfinesEgress() = false with %s", r)
	}
	proxy, other := listenLoopback(t), listenLoopback(t)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	script := `
try() { bash -c "echo hi > /dev/$1/127.0.0.1/$2" 2>/dev/null && echo "$3"; }
try tcp %[1]d PROXY-OK
try tcp %[2]d OTHER-TCP
try udp %[3]d UDP-SENT
perl -MSocket -e 'socket(my $s, AF_INET, SOCK_DGRAM, 0) ? exit 0 : exit 1' && echo UDP-SOCKET
perl -MSocket -e 'socket(my $s, AF_INET, SOCK_STREAM, 0) or exit 1; defined(send($s, "hi\n", 0x20000000, pack_sockaddr_in(%[2]d, inet_aton("127.0.0.1")))) ? exit 0 : exit 1' && echo TFO-SENT
echo done`
	script = fmt.Sprintf(script, proxy.port(), other.port(), udp.LocalAddr().(*net.UDPAddr).Port)

	ss, dir := b.session(t, "confined")
	ss.ConfineNet, ss.EgressPort = true, proxy.port()
	out, _ := run(t, ss, dir, script)
	if !strings.Contains(out, "PROXY-OK") || !strings.Contains(out, "done") {
		t.Errorf("the confined session cannot reach its egress port:\n%s", out)
	}
	for _, leak := range []string{"OTHER-TCP", "UDP-SENT", "UDP-SOCKET", "TFO-SENT"} {
		if strings.Contains(out, leak) {
			t.Errorf("the confined session got %s:\n%s", leak, out)
		}
	}
	// Confinement set after the supervisor started is refused, not
	// silently missing.
	late, ldir := b.session(t, "late")
	if err := late.Warm(); err != nil {
		t.Fatal(err)
	}
	late.ConfineNet, late.EgressPort = true, proxy.port()
	if _, err := late.Start(Spec{Path: "/bin/true", Dir: ldir}); err == nil || !strings.Contains(err.Error(), "ConfineNet") {
		t.Errorf("Start after ConfineNet was set on a warm session: %v, want an error", err)
	}
	// Unconfined, the same script reaches the other listener and UDP.
	free, fdir := b.session(t, "free")
	out, _ = run(t, free, fdir, script)
	for _, want := range []string{"PROXY-OK", "OTHER-TCP", "UDP-SENT", "TFO-SENT"} {
		if !strings.Contains(out, want) {
			t.Errorf("an unconfined session lacks %s; the test proves nothing:\n%s", want, out)
		}
	}
}

type loopback struct{ net.Listener }

func (l loopback) port() int { return l.Addr().(*net.TCPAddr).Port }

func listenLoopback(t *testing.T) loopback {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	return loopback{ln}
}

// childEnv names the mode a re-executed test binary runs in.
const childEnv = "SANDBOX_ENFORCE_CHILD"

// reexec runs this test's binary again as test name, under wrapper (a
// command that drops privileges, then executes the rest) or with cred,
// with mode in childEnv and a directory of its own, and fails the test if
// the child does.
func reexec(t *testing.T, name, mode string, wrapper []string, cred *syscall.Credential) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop privileges")
	}
	dir, err := os.MkdirTemp("/var/tmp", "sandbox-enforce-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append(append([]string{}, wrapper...), bin, "-test.run=^"+name+"$", "-test.v")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{childEnv + "=" + mode, "SANDBOX_TEST_DIR=" + dir, "PATH=/usr/bin:/bin", "HOME=" + dir}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test as %s: %v\n%s", mode, err, out)
	}
	t.Logf("as %s:\n%s", mode, out)
}

// notDumpable makes the test process non-dumpable, as the kit makes
// itself to keep its key out of /proc.
func notDumpable(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// TestRootlessNotDumpable: a kit that is not root and made itself
// non-dumpable gets the user namespace sandbox all the same.
func TestRootlessNotDumpable(t *testing.T) {
	if os.Getenv(childEnv) == "rootless" {
		notDumpable(t)
		b := newBoxIn(t, os.Getenv("SANDBOX_TEST_DIR"), Config{})
		r := b.sb.Report()
		t.Log(r)
		for _, l := range []string{LayerUserNS, LayerPrivileges, LayerMount, LayerPID, LayerNetwork, LayerLandlock, LayerSeccomp} {
			if !r.Has(l) {
				t.Errorf("layer %s not in force for a non-dumpable kit without root: %s", l, r)
			}
		}
		ss, dir := b.session(t, "s")
		out, st := run(t, ss, dir, `id -u; grep -E '^CapBnd:' /proc/self/status; echo ok > f && cat f`)
		if st.Code != 0 || !strings.Contains(out, "0\nCapBnd:\t0000000000000000\nok\n") {
			t.Errorf("a command: %v:\n%s", st, out)
		}
		checkAttack(t, b)
		return
	}
	reexec(t, "TestRootlessNotDumpable", "rootless", nil, &syscall.Credential{Uid: 10001, Gid: 10001, Groups: []uint32{}})
}

// TestNonRootDockerLike: a non-root kit where user namespaces are refused
// (here by a seccomp filter installed on the test first, as Docker's
// default profile does): Landlock and seccomp alone keep sessions apart.
func TestNonRootDockerLike(t *testing.T) {
	if os.Getenv(childEnv) == "docker" {
		notDumpable(t)
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := seccompInstall(seccompOptions{}); err != nil {
			t.Fatal(err)
		}
		runtime.UnlockOSThread()
		b := newBoxIn(t, os.Getenv("SANDBOX_TEST_DIR"), Config{})
		r := b.sb.Report()
		t.Log(r)
		if r.Has(LayerUserNS) || r.Has(LayerMount) {
			t.Fatalf("user namespaces are refused, yet: %s", r)
		}
		if r.Privileges == "" {
			t.Errorf("the report claims an emptied bounding set a non-root kit cannot empty: %s", r)
		}
		checkAttack(t, b)
		checkEgress(t, b)
		ss, dir := b.session(t, "caps")
		out, _ := run(t, ss, dir, `grep -E '^(CapEff|CapPrm|CapInh|CapAmb|NoNewPrivs):' /proc/self/status; echo t > /tmp/glovebox-shared-$$ 2>/dev/null && echo SHARED-TMP`)
		for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "SHARED-TMP") {
			t.Errorf("the session wrote to the shared /tmp:\n%s", out)
		}
		// Without Landlock, a command under the supervisor's uid still
		// cannot write the supervisor's memory (whose other threads are
		// in no Landlock domain): the supervisor is not dumpable.
		b.sb.landlock = 0
		ss, dir = b.session(t, "no-landlock")
		if out, _ := run(t, ss, dir, `(exec 3<>/proc/$PPID/mem) 2>/dev/null && echo OPENED-SUPERVISOR-MEM; echo done`); out != "done\n" {
			t.Errorf("without Landlock: %q", out)
		}
		return
	}
	reexec(t, "TestNonRootDockerLike", "docker", nil, &syscall.Credential{Uid: 10001, Gid: 10001, Groups: []uint32{}})
}

// hardenedCaps are the capabilities a hardened pod adds back after
// dropping ALL.
var hardenedCaps = "-all,+setuid,+setgid,+chown,+fowner,+dac_override,+kill"

// TestHardenedPod: root with only the capabilities a hardened pod adds
// back (no CAP_SETPCAP, no CAP_SYS_ADMIN): a uid per session, every
// command runs, and the report says the bounding set is kept.
func TestHardenedPod(t *testing.T) {
	if os.Getenv(childEnv) == "hardened" {
		b := newBoxIn(t, os.Getenv("SANDBOX_TEST_DIR"), Config{})
		r := b.sb.Report()
		t.Log(r)
		if !r.Has(LayerUsers) || !r.Has(LayerPrivileges) || r.Privileges == "" {
			t.Errorf("report: %s (privileges: %q)", r, r.Privileges)
		}
		ss, dir := b.session(t, "s")
		out, st := run(t, ss, dir, `id -u; grep -E '^(CapEff|CapPrm|CapInh|CapAmb|NoNewPrivs):' /proc/self/status`)
		if st.Code != 0 {
			t.Fatalf("a command: %v:\n%s", st, out)
		}
		for _, want := range []string{strconv.Itoa(ss.UID()) + "\n", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		checkAttack(t, b)
		return
	}
	reexec(t, "TestHardenedPod", "hardened", []string{"setpriv", "--bounding-set", hardenedCaps, "--inh-caps", "-all", "--"}, nil)
}

// TestRootWithoutCapabilities: root with every capability dropped
// (Docker's --cap-drop ALL) cannot make a user namespace (mapping root
// needs CAP_SETFCAP) nor give sessions uids, but its bounding set is
// empty already: commands run, as root without a capability nor a way
// to gain one, and the report says the privileges layer holds. Root
// that keeps some capability but not CAP_SETPCAP cannot empty the set:
// its commands, which would run as root able to regain that capability,
// are refused with the reason.
func TestRootWithoutCapabilities(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "nocaps":
		b := newBoxIn(t, os.Getenv("SANDBOX_TEST_DIR"), Config{})
		r := b.sb.Report()
		t.Log(r)
		if r.Has(LayerUsers) || r.Inactive[LayerUsers] == "" || !r.Has(LayerPrivileges) || r.Privileges != "" {
			t.Errorf("report: %s (privileges: %q)", r, r.Privileges)
		}
		ss, dir := b.session(t, "s")
		out, st := run(t, ss, dir, `id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status`)
		if st.Code != 0 {
			t.Fatalf("a command as root with an empty bounding set: %v:\n%s", st, out)
		}
		for _, want := range []string{"0\n", "CapBnd:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "NoNewPrivs:\t1"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		return
	case "somecaps":
		b := newBoxIn(t, os.Getenv("SANDBOX_TEST_DIR"), Config{})
		r := b.sb.Report()
		t.Log(r)
		if r.Has(LayerPrivileges) || !strings.Contains(r.Inactive[LayerPrivileges], "CAP_SETPCAP") {
			t.Errorf("report: %s", r)
		}
		ss, dir := b.session(t, "s")
		if _, err := ss.Start(Spec{Path: "/bin/true", Dir: dir}); err == nil || !strings.Contains(err.Error(), "CAP_SETPCAP") {
			t.Errorf("Start as root keeping CAP_KILL without CAP_SETPCAP: %v, want the reason it cannot run", err)
		}
		return
	}
	t.Run("none", func(t *testing.T) {
		reexec(t, "TestRootWithoutCapabilities", "nocaps", []string{"setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--"}, nil)
	})
	t.Run("kill only", func(t *testing.T) {
		reexec(t, "TestRootWithoutCapabilities", "somecaps", []string{"setpriv", "--bounding-set", "-all,+kill", "--inh-caps", "-all", "--"}, nil)
	})
}

// TestLandlockRefusedByTheContainer: where the container's seccomp
// profile refuses Landlock's system calls (EPERM, as Docker's default
// profile answers calls it does not know), the report says landlock is
// not in force, and why, and that sessions are not kept apart.
func TestLandlockRefusedByTheContainer(t *testing.T) {
	if os.Getenv(childEnv) == "nolandlock" {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		refuse := []refusal{{nr: unix.SYS_LANDLOCK_CREATE_RULESET}, {nr: unix.SYS_LANDLOCK_ADD_RULE}, {nr: unix.SYS_LANDLOCK_RESTRICT_SELF}}
		prog, err := seccompFilter(seccompNative, refuse, seccompOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
			t.Fatal(e)
		}
		runtime.UnlockOSThread()
		b := newBoxIn(t, os.Getenv("SANDBOX_TEST_DIR"), dockerLike)
		r := b.sb.Report()
		t.Log(r)
		if r.Has(LayerLandlock) || r.Landlock != 0 || !strings.Contains(r.Inactive[LayerLandlock], "seccomp") {
			t.Errorf("landlock refused by the container, yet: %s", r)
		}
		if !r.Has(LayerSeccomp) || r.Separation() == "" || r.ConfinesEgress() {
			t.Errorf("report: %s; Separation() = %q", r, r.Separation())
		}
		return
	}
	reexec(t, "TestLandlockRefusedByTheContainer", "nolandlock", nil, nil)
}
