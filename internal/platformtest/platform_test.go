//go:build platforms

package platformtest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// profile is one deploy target's default security, and what the kit
// must do under it.
type profile struct {
	name string
	// how says where the profile's settings come from.
	how string
	// kind is how the kit starts: "runc" (c's container), "vm" (on this
	// machine as root, no container) or "dev" (gbx dev as devUID).
	kind   string
	c      container
	devUID int
	// refuse, when set, says why the kit cannot keep sessions apart or
	// enforce its [network] policy here: it must refuse to start without
	// sandbox.allow_degraded (GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1), and the
	// attacks then run on a kit started with it.
	refuse string
	// active and inactive are layers /environment must report in force
	// and not in force; a layer in neither is not checked.
	active, inactive []string
	// breaches are the attacks that succeed here, each with the reason;
	// every other attack must fail.
	breaches map[string]string
}

const (
	noCgroup  = "no cgroup layer (the container's cgroup file system is read-only, or the kit is not root): a session's memory is bounded only by the container's"
	shared    = "sessions, their supervisors and the kit share one uid with no namespace or Landlock domain between them (the kit and the supervisors are not dumpable: their memory and ptrace stay out of reach)"
	noPidsCap = "no cgroup and no uid of its own: nothing counts a session's processes but the container's pids limit"
)

// profiles is the matrix: one row per deploy target's default security,
// and rows with a layer taken away that show the attacks detect it.
func profiles() []profile {
	arch := runtime.GOARCH
	docker := dockerProfile(arch, dockerCaps)
	nocaps := dockerProfile(arch, nil)
	oldDocker := withoutLandlock(docker)
	oldNocaps := withoutLandlock(nocaps)
	all := []string{"users", "privileges", "mount", "pid", "network", "cgroup", "landlock", "seccomp"}
	return []profile{
		{
			name: "vm-root", kind: "vm",
			how:    "Fly and any VM: the kit runs as root with every capability, no seccomp, cgroup v1 or v2 writable",
			active: all,
		},
		{
			name: "docker", kind: "runc",
			how: "docker run: root, Docker's default capabilities (moby oci/caps), its default seccomp profile (generated, testdata/seccomp), masked and read-only /proc paths, read-only cgroup file system, no_new_privs off",
			c:   container{uid: 0, gid: 0, caps: dockerCaps, seccomp: &docker},
			// Without CAP_SYS_ADMIN the profile refuses clone with
			// namespace flags, unshare and mount.
			active:   []string{"users", "privileges", "landlock", "seccomp"},
			inactive: []string{"mount", "pid", "network", "cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup},
		},
		{
			// No CAP_SYS_ADMIN: no namespace of the kit's own making, but
			// nothing refuses a user namespace either; whether one gives
			// mount, pid and network namespaces under the container's
			// masked /proc is the kit's to find out, so they are not
			// checked. The cgroup file system is read-only.
			name: "k8s-baseline", kind: "runc",
			how:      "Pod Security baseline: root, containerd's default capabilities (Docker's set), seccomp Unconfined (baseline's default), allowPrivilegeEscalation true",
			c:        container{uid: 0, gid: 0, caps: dockerCaps},
			active:   []string{"users", "privileges", "landlock", "seccomp"},
			inactive: []string{"cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup},
		},
		{
			// Not root, no capabilities, and the runtime default profile
			// refuses every namespace: Landlock and seccomp keep sessions
			// apart and their traffic in the proxy.
			name: "k8s-restricted", kind: "runc",
			how:      "Pod Security restricted: runAsNonRoot (uid 10001 gid 10001), capabilities drop ALL, seccomp RuntimeDefault (the runtime default profile resolved for no capabilities), allowPrivilegeEscalation false (no_new_privs)",
			c:        container{uid: 10001, gid: 10001, seccomp: &nocaps, noNewPrivs: true},
			active:   []string{"privileges", "landlock", "seccomp"},
			inactive: []string{"users", "mount", "pid", "network", "cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup, "fork-unbounded": noPidsCap},
		},
		{
			name: "openshift-uid", kind: "runc",
			how:      "OpenShift restricted SCC: an arbitrary uid (1000870000) in group 0, no capabilities, the runtime default seccomp profile; the image's directories group-root and group-writable",
			c:        container{uid: 1000870000, gid: 0, seccomp: &nocaps, openshift: true},
			active:   []string{"privileges", "landlock", "seccomp"},
			inactive: []string{"users", "mount", "pid", "network", "cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup, "fork-unbounded": noPidsCap},
		},
		{
			name: "uid-10001", kind: "runc",
			how:      "an image run as its user glovebox (10001), as older images and nixpacks hosts that set a user do: no capabilities, Docker's default seccomp profile",
			c:        container{uid: 10001, gid: 10001, seccomp: &docker},
			active:   []string{"privileges", "landlock", "seccomp"},
			inactive: []string{"users", "mount", "pid", "network", "cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup, "fork-unbounded": noPidsCap},
		},
		{
			// Root with an empty bounding set: no uid per session (no
			// CAP_SETUID, CAP_CHOWN), nothing left to drop; Landlock and
			// seccomp keep sessions apart, and prompts must run.
			name: "docker-cap-drop-all", kind: "runc",
			how:      "docker run --cap-drop=ALL (a common hardening; root without capabilities): the runtime default seccomp profile resolved for no capabilities",
			c:        container{uid: 0, gid: 0, seccomp: &nocaps},
			active:   []string{"privileges", "landlock", "seccomp"},
			inactive: []string{"users", "mount", "pid", "network", "cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup, "fork-unbounded": noPidsCap},
		},
		{
			name: "dev-root", kind: "dev", devUID: 0,
			how:    "gbx dev run as root on a developer's Linux machine: the kit in process, no container",
			active: all,
		},
		{
			// Not root, but user namespaces are allowed: every namespace
			// through one, no uid per session, no cgroup.
			name: "dev-user", kind: "dev", devUID: 1000870001,
			how:      "gbx dev run as a developer (a uid of no account) on a Linux machine that allows user namespaces",
			active:   []string{"userns", "privileges", "mount", "pid", "network", "landlock", "seccomp"},
			inactive: []string{"users", "cgroup"},
			breaches: map[string]string{"mem-unbounded": noCgroup, "fork-unbounded": noPidsCap},
		},
		// A layer taken away: the attacks must detect it.
		{
			name: "docker-no-landlock", kind: "runc",
			how:      "Docker's defaults with a runtime profile that refuses landlock_* and seccomp (as profiles did before Landlock): nothing confines egress",
			c:        container{uid: 0, gid: 0, caps: dockerCaps, seccomp: &oldDocker},
			refuse:   "no network namespace and no Landlock: the [network] policy cannot be enforced",
			active:   []string{"users", "privileges"},
			inactive: []string{"mount", "pid", "network", "cgroup", "landlock", "seccomp"},
			breaches: map[string]string{
				"mem-unbounded":     noCgroup,
				"egress-tcp":        "nothing keeps a session's TCP inside the proxy",
				"egress-ipv6":       "nothing keeps a session's TCP inside the proxy",
				"egress-proxy-port": "nothing keeps a session's TCP inside the proxy",
				"egress-udp":        "no seccomp filter refuses UDP",
			},
		},
		{
			name: "restricted-no-landlock", kind: "runc",
			how:      "Pod Security restricted with a runtime profile that refuses landlock_* and seccomp: every session runs as the kit's uid with nothing between them",
			c:        container{uid: 10001, gid: 10001, seccomp: &oldNocaps, noNewPrivs: true},
			refuse:   "no uid, namespace or Landlock domain per session: sessions cannot be kept apart",
			active:   []string{"privileges"},
			inactive: []string{"users", "mount", "pid", "network", "cgroup", "landlock", "seccomp"},
			breaches: map[string]string{
				"mem-unbounded":     noCgroup,
				"fork-unbounded":    noPidsCap,
				"cross-read":        shared,
				"cross-list":        shared,
				"cross-write":       shared,
				"plant-output":      shared,
				"cross-environ":     shared,
				"signal-kit":        shared,
				"signal-victim":     shared,
				"signal-supervisor": shared,
				"mem-victim":        shared,
				"ptrace-victim":     shared,
				"egress-tcp":        "nothing keeps a session's TCP inside the proxy",
				"egress-ipv6":       "nothing keeps a session's TCP inside the proxy",
				"egress-proxy-port": "nothing keeps a session's TCP inside the proxy",
				"egress-udp":        "no seccomp filter refuses UDP",
			},
		},
	}
}

// TestPlatforms runs the kit under every profile and attacks it.
func TestPlatforms(t *testing.T) {
	runc := requirePlatform(t)
	bins := buildBins(t)
	host := startTestHost(t)
	for _, p := range profiles() {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			t.Log(p.how)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			k := bootKit(t, ctx, runc, bins, p)
			// The kit trusts glovebox-sandbox installed beside it (root's,
			// mode 0755, in a root-owned directory); gbx dev serves as
			// its own supervisor.
			// The line is the kit's boot log's, which a container's stdio
			// relays: it may land after /health first answers.
			beside := func() bool { return strings.Contains(k.log(), "glovebox-sandbox (installed beside the kit)") }
			if p.kind != "dev" && testkit.Poll(ctx, beside) != nil {
				t.Errorf("the kit does not use the glovebox-sandbox beside it:\n%s", k.log())
			}
			iso, err := isolation(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("layers: %v; not in force: %v; landlock ABI %d", iso.Active, iso.Inactive, iso.Landlock)
			for _, l := range p.active {
				if !slices.Contains(iso.Active, l) {
					t.Errorf("layer %s is not in force, want it (not in force because: %q)", l, iso.Inactive[l])
				}
			}
			for _, l := range p.inactive {
				if slices.Contains(iso.Active, l) {
					t.Errorf("layer %s is reported in force, want it off here", l)
				} else if iso.Inactive[l] == "" {
					t.Errorf("layer %s is off with no reason in /environment", l)
				}
			}
			// A root kit with a uid per session serves from an
			// unprivileged front (privilege separation); elsewhere there
			// is no root to separate from.
			switch separated := slices.Contains(iso.Active, "users") && p.kind != "dev"; {
			case separated && !strings.Contains(iso.Front, "uid 199999"):
				t.Errorf("isolation.front = %q, want the front's uid 199999: a root kit with a uid per session serves unprivileged", iso.Front)
			case !separated && iso.Front != "":
				t.Errorf("isolation.front = %q, want none: this kit does its own privileged work", iso.Front)
			}

			s := openSession(t, k)
			if out, err := s.prompt(ctx, "echo hello"); err != nil || out != "hello\n" {
				t.Fatalf("prompt echo hello = %q, %v; want hello\nkit log:\n%s", out, err, k.log())
			}
			s.close()

			got := attack(t, ctx, k, host)
			// Where Landlock, not a network namespace, keeps a session's
			// TCP in the proxy, its rules name the proxy's port, not its
			// host: a server on that port number elsewhere is reached.
			breaches := maps.Clone(p.breaches)
			if breaches == nil {
				breaches = map[string]string{}
			}
			if !slices.Contains(iso.Active, "network") && slices.Contains(iso.Active, "landlock") {
				breaches["egress-proxy-port"] = "Landlock's TCP rules name ports, not hosts: a server listening on the session's proxy port number at another address is reachable"
			}
			for _, b := range slices.Sorted(maps.Keys(got)) {
				if why, ok := breaches[b]; ok {
					t.Logf("attack %s succeeds, as expected: %s", b, why)
					continue
				}
				t.Errorf("attack %s succeeded: %s", b, got[b])
			}
			for _, b := range slices.Sorted(maps.Keys(breaches)) {
				if _, ok := got[b]; !ok {
					t.Errorf("attack %s failed, but the profile expects it to succeed (%s): the test no longer detects it, or the row is out of date", b, breaches[b])
				}
			}
			// The kit survived everything and still serves.
			s = openSession(t, k)
			if out, err := s.prompt(ctx, "echo alive"); err != nil || out != "alive\n" {
				t.Errorf("after the attacks, prompt echo alive = %q, %v\nkit log:\n%s", out, err, k.log())
			}
			s.close()
			if panicRE.MatchString(k.log()) {
				t.Errorf("the kit panicked:\n%s", k.log())
			} else if t.Failed() {
				t.Logf("kit log:\n%s", k.log())
			}
			select {
			case err := <-k.exited:
				k.exited <- err
				t.Errorf("the kit exited during the attacks: %v", err)
			default:
			}
		})
	}
}

// startKit starts the kit as p says, with allow_degraded or without.
func startKit(t *testing.T, runc, bins string, p profile, degraded bool) *kitProc {
	t.Helper()
	key := protocol.NewKey()
	switch p.kind {
	case "vm":
		return startDirect(t, bins, key, degraded)
	case "dev":
		return startDev(t, bins, key, p.devUID)
	}
	return startContainer(t, runc, bins, key, p.c, degraded)
}

// bootKit starts the kit without allow_degraded and checks that it
// serves, or, where p says it cannot keep sessions apart or enforce its
// policy, that it refuses to start, naming the setting, and serves once
// started with it.
func bootKit(t *testing.T, ctx context.Context, runc, bins string, p profile) *kitProc {
	t.Helper()
	k := startKit(t, runc, bins, p, false)
	err := k.waitServing(ctx)
	switch {
	case p.refuse != "" && err == nil:
		t.Errorf("the kit serves without allow_degraded, but %s: it must refuse to start\nkit log:\n%s", p.refuse, k.log())
	case p.refuse != "":
		if !strings.Contains(k.log(), "allow_degraded") {
			t.Errorf("the kit refused to start (%v) without naming sandbox.allow_degraded:\n%s", err, k.log())
		}
		k = startKit(t, runc, bins, p, true)
		if err := k.waitServing(ctx); err != nil {
			t.Fatalf("with allow_degraded the kit does not serve: %v\nkit log:\n%s", err, k.log())
		}
	case err != nil:
		t.Fatalf("the kit does not serve: %v\nkit log:\n%s", err, k.log())
	}
	return k
}

// session is one client session to a kit.
type session struct {
	t *testing.T
	c *client.Client
	b *client.Box
}

func openSession(t *testing.T, k *kitProc) *session {
	t.Helper()
	c, err := client.New(map[string]client.Endpoint{"box": {URL: "ws://" + k.base() + "/", Key: k.key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := c.Box("box")
	if err != nil {
		t.Fatal(err)
	}
	return &session{t: t, c: c, b: b}
}

func (s *session) start(ctx context.Context, text string) (*client.Result, error) {
	return s.b.Prompt(ctx, text, client.PromptOptions{DiscardEvents: true})
}

// prompt runs text and returns the prompt's message.
func (s *session) prompt(ctx context.Context, text string) (string, error) {
	out, _, err := s.promptOutputs(ctx, text)
	return out, err
}

func (s *session) promptOutputs(ctx context.Context, text string) (string, map[string]protocol.FileRef, error) {
	r, err := s.start(ctx, text)
	if err != nil {
		return "", nil, err
	}
	done, err := r.Wait(ctx)
	if err != nil {
		return "", nil, err
	}
	return done.Message, done.Outputs, nil
}

// close ends the session: a clean close ends it at once.
func (s *session) close() { s.c.Close() }

var panicRE = regexp.MustCompile(`(?m)^panic: |^fatal error: `)

var breachRE = regexp.MustCompile(`(?m)^BREACH (\S+)(.*)$`)

// attack runs the attack suite on k through real sessions and returns
// the attacks that succeeded, each with its evidence.
func attack(t *testing.T, ctx context.Context, k *kitProc, host *testHost) map[string]string {
	t.Helper()
	got := map[string]string{}
	hit := func(name, evidence string) {
		if _, ok := got[name]; !ok {
			got[name] = evidence
		}
	}
	att := k.attacker
	tag := randomHex(t, 4)

	// B, the victim: a private file, and a prompt still running while A
	// attacks. Its text carries a secret no process it starts shows.
	b := openSession(t, k)
	out, err := b.prompt(ctx, `echo "$GLOVEBOX_SESSION $GLOVEBOX_WORK $GLOVEBOX_OUTPUT"; echo victim-secret > "$GLOVEBOX_WORK/private.txt"`)
	f := strings.Fields(out)
	if err != nil || len(f) != 3 {
		t.Fatalf("victim prompt = %q, %v\nkit log:\n%s", out, err, k.log())
	}
	bID, bWork, bOut := f[0], f[1], f[2]
	secret := "PROMPTSECRET-" + tag
	victimProc := "victim-proc-" + tag
	// (Neither shell may exec its last command in its own place: each
	// ends with a builtin.)
	long, err := b.start(ctx, ": "+secret+"; sh -c 'sleep 8; :' "+victimProc+"; :")
	if err != nil {
		t.Fatal(err)
	}
	if err := testkit.Poll(ctx, func() bool { return len(testkit.WithCmdline(victimProc)) > 0 }); err != nil {
		t.Fatalf("the victim's long prompt never started: %v", err)
	}

	// A, the attacker.
	a := openSession(t, k)
	script := fmt.Sprintf(`%[1]s scan -key %[2]s -session "$GLOVEBOX_SESSION" -victim %[3]s -secret %[4]s
%[1]s ns
grep -q victim-secret %[5]s/private.txt 2>/dev/null && echo "BREACH cross-read"
ls %[5]s 2>/dev/null | grep -q private.txt && echo "BREACH cross-list"
(echo planted > %[5]s/planted-by-a) 2>/dev/null && echo "BREACH cross-write"
(echo planted > %[6]s/planted.txt) 2>/dev/null && echo "PLANTED"
echo attack-done`, att, k.key, victimProc, secret, bWork, bOut)
	out, err = a.prompt(ctx, script)
	if err != nil || !strings.Contains(out, "scan-done") || !strings.Contains(out, "attack-done") {
		t.Fatalf("the attack did not run: %q, %v", out, err)
	}
	t.Logf("scan: %s", lineWith(out, "scan-done"))
	for _, m := range breachRE.FindAllStringSubmatch(out, -1) {
		hit(m[1], strings.TrimSpace(m[2]))
	}
	// A's file, planted while B's prompt ran, must not come back as one
	// of its outputs, nor with B's next prompt.
	if done, err := long.Wait(ctx); err != nil {
		t.Errorf("the victim's long prompt: %v", err)
	} else if _, ok := done.Outputs["planted.txt"]; ok {
		hit("plant-output", "B's prompt returned planted.txt, written by A while it ran")
	}
	// B's next prompt must not return what A planted in its outputs.
	out, outputs, err := b.promptOutputs(ctx, `ls "$GLOVEBOX_WORK"`)
	if err != nil {
		t.Errorf("victim's next prompt: %v", err)
	}
	if _, ok := outputs["planted.txt"]; ok {
		hit("plant-output", "B's next prompt returned planted.txt, written by A")
	}
	if strings.Contains(out, "planted-by-a") {
		hit("cross-write", "B's work directory holds A's file")
	}
	_ = bID
	b.close()
	a.close()

	// Survivors: processes a session leaves behind, detached, must end
	// with it.
	surv := "survivor-" + tag
	c := openSession(t, k)
	loop := `'while :; do sleep 1; done'`
	if _, err := c.prompt(ctx, fmt.Sprintf(`setsid sh -c %[1]s %[2]s </dev/null >/dev/null 2>&1 &
nohup sh -c %[1]s %[2]s </dev/null >/dev/null 2>&1 &
sleep 0.5; echo started`, loop, surv)); err != nil {
		t.Errorf("survivor prompt: %v", err)
	}
	c.close()
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	if err := testkit.Poll(wctx, func() bool { return len(testkit.WithCmdline(surv)) == 0 }); err != nil {
		var left []string
		for _, pid := range testkit.WithCmdline(surv) {
			left = append(left, procLine(pid))
			syscall.Kill(pid, syscall.SIGKILL)
		}
		hit("survivor", "processes outlived their session by 15s: "+strings.Join(left, "; "))
	}
	wcancel()

	// Egress past the proxy, and through it.
	n := openSession(t, k)
	out, err = n.prompt(ctx, fmt.Sprintf("%s net -host %s -port %d -udp %d", att, host.addr, host.port, host.udp))
	if err != nil {
		t.Errorf("net attack: %v", err)
	}
	t.Logf("net: %s", strings.ReplaceAll(out, "\n", "; "))
	for _, m := range breachRE.FindAllStringSubmatch(out, -1) {
		hit(m[1], strings.TrimSpace(m[2]))
	}
	if !strings.Contains(out, "PROXY-OK") {
		hit("proxy-blocked", "the test host, allowed by [network], is not reachable through the proxy: "+lineWith(out, "PROXY"))
	}
	n.close()

	// Bombs, each in a session of its own.
	bomb := func(script string) string {
		s := openSession(t, k)
		defer s.close()
		out, err := s.prompt(ctx, script)
		if err != nil {
			return err.Error()
		}
		return out
	}
	out = bomb(att + " fork 300")
	if m := regexp.MustCompile(`FORKED (\d+)`).FindStringSubmatch(out); m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= 300 {
			hit("fork-unbounded", "a session started 300 processes (sandbox.pids = 64)")
		}
	}
	out = bomb(att + " mem 320")
	if strings.Contains(out, "MEM-DONE") {
		hit("mem-unbounded", "a session allocated 320 MiB (limits.memory = 64Mi)")
	}
	// limits.disk: the session may not come to hold more than 8Mi, by
	// three files of 6Mi each (RLIMIT_FSIZE alone stops none of them).
	out = bomb(att + ` disk "$GLOVEBOX_WORK" 3 6; du -sk "$GLOVEBOX_WORK"`)
	if m := regexp.MustCompile(`(?m)^(\d+)\s`).FindStringSubmatch(out); m != nil {
		if kb, _ := strconv.Atoi(m[1]); kb > 8*1024+512 {
			hit("disk-over", fmt.Sprintf("a session holds %d KiB (limits.disk = 8Mi)", kb))
		}
	} else if m := regexp.MustCompile(`directories hold (\S+), over limits.disk`).FindStringSubmatch(out); m != nil {
		hit("disk-over", "a session came to hold "+m[1]+" (limits.disk = 8Mi), refused only afterwards")
	} else {
		t.Logf("disk bomb: %q", out)
	}
	return got
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// procLine describes a process for a failure: pid, parent, session,
// uid and command line.
func procLine(pid int) string {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	var ppid, sid string
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 {
		if f := strings.Fields(string(stat[i+1:])); len(f) > 4 {
			ppid, sid = f[1], f[3]
		}
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	uid := strings.Fields(lineWith(string(status), "Uid:") + " ? ?")[1]
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return fmt.Sprintf("pid %d ppid %s sid %s uid %s: %s", pid, ppid, sid, uid, strings.ReplaceAll(string(cmd), "\x00", " "))
}
