//go:build platforms

package platformtest

// The harness: the binaries, built once; runc bundles; the three ways a
// kit starts (in a runc container, on this machine as a VM runs it, and
// as gbx dev). The test host in a network namespace is testhost_test.go's.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/protocol"
)

// busybox is where Debian's busybox-static installs its static binary.
const busybox = "/bin/busybox"

// requirePlatform skips the test unless it runs as root with runc, ip and
// a static busybox; with CI set, a missing tool fails it.
func requirePlatform(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the platform matrix needs root (runc, network namespaces)")
	}
	_, ci := os.LookupEnv("CI")
	miss := func(format string, args ...any) {
		if ci {
			t.Fatalf(format+", and CI is set: install it (apt-get install -y runc busybox-static iproute2)", args...)
		}
		t.Skipf(format+" (set CI to make this a failure)", args...)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		miss("runc is not on PATH")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		miss("ip is not on PATH")
	}
	if _, err := os.Stat(busybox); err != nil {
		miss("%s: %v", busybox, err)
	}
	return runc
}

// bins is a directory holding glovebox-kit, glovebox-sandbox, gbx and
// attacker, static, owned by root, mode 0755, in a root-owned directory:
// as an image installs the kit, so that it trusts glovebox-sandbox beside
// it. It lives under /var/tmp: sessions with a mount namespace get a
// private /tmp.
func buildBins(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "glovebox-platforms-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/",
		"./cmd/glovebox-kit", "./cmd/glovebox-sandbox", "./cmd/gbx", "./internal/platformtest/attacker")
	cmd.Dir = nixtest.ModuleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// manifest is the box every profile serves: the exec agent, a [network]
// policy that allows the test host's range and nothing else, the limits
// the bombs hit.
func manifest(key string, degraded bool) []byte {
	m, _ := protocol.ParseManifest([]byte(`{"name":"platforms","agent":{"type":"exec","warm":0}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.Limits = protocol.Limits{Memory: "64Mi", Disk: "8Mi", Timeout: "60s"}
	m.Network = &protocol.NetworkSpec{Default: protocol.NetworkDeny, Allow: []string{"198.18.0.0/15"}}
	m.Sandbox = &protocol.SandboxSpec{Pids: 64, AllowDegraded: degraded}
	b, _ := json.Marshal(m)
	return b
}

// kitProc is a running kit, however it was started.
type kitProc struct {
	port     int
	key      string
	attacker string // the attacker's path as sessions see it
	exited   chan error
	log      func() string
}

func (k *kitProc) base() string { return "127.0.0.1:" + strconv.Itoa(k.port) }

// waitServing waits until the kit answers /health with 200 (nil) or its
// process exits (the exit error, never nil).
func (k *kitProc) waitServing(ctx context.Context) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+k.base()+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-k.exited:
			k.exited <- err
			if err == nil {
				err = errors.New("exit status 0")
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("/health never answered 200: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// logFile is a file the kit logs to and the test reads.
func logFile(t *testing.T, dir string) (*os.File, func() string) {
	t.Helper()
	path := filepath.Join(dir, "kit.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, func() string { b, _ := os.ReadFile(path); return string(b) }
}

// startProcess starts cmd, logging to dir/kit.log, and stops it (SIGTERM,
// then SIGKILL) when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd, dir string) (chan error, func() string) {
	t.Helper()
	f, read := logFile(t, dir)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = mergeAttr(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-exited:
			exited <- err
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			exited <- <-exited
		}
	})
	return exited, read
}

func mergeAttr(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	a.Pdeathsig = syscall.SIGKILL
	return a
}

// startDirect runs the kit on this machine as root, as a VM (Fly) runs
// it: its directories re-rooted under a directory of its own.
func startDirect(t *testing.T, bins, key string, degraded bool) *kitProc {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "glovebox-vm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	man := filepath.Join(root, "glovebox.json")
	if err := os.WriteFile(man, manifest(key, false), 0o444); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command(filepath.Join(bins, "glovebox-kit"), "--manifest", man, "--root", root)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=" + strconv.Itoa(port), "GLOVEBOX_INIT=off"}
	if degraded {
		cmd.Env = append(cmd.Env, "GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1")
	}
	exited, log := startProcess(t, cmd, t.TempDir())
	return &kitProc{port: port, key: key, attacker: filepath.Join(bins, "attacker"), exited: exited, log: log}
}

// startDev runs gbx dev on a directory holding the box's manifest, as a
// developer does, as uid (0 for root).
func startDev(t *testing.T, bins, key string, uid int) *kitProc {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "glovebox-dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "glovebox.json"), manifest(key, false), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	port := freePort(t)
	cmd := exec.Command(filepath.Join(bins, "gbx"), "dev", dir, "--no-nix", "--addr", "127.0.0.1:"+strconv.Itoa(port))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GLOVEBOX_KEY=" + key, "HOME=" + dir}
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	logDir := t.TempDir()
	os.Chmod(logDir, 0o755)
	exited, log := startProcess(t, cmd, logDir)
	return &kitProc{port: port, key: key, attacker: filepath.Join(bins, "attacker"), exited: exited, log: log}
}

// container is a profile's runc container, as the runtime it stands
// for would configure it.
type container struct {
	uid, gid int
	// caps is the capability set (bounding, and effective and permitted
	// for root); nil is none.
	caps []string
	// seccomp is the filter; nil runs the container unconfined.
	seccomp *Seccomp
	// noNewPrivs sets no_new_privs on the container's process.
	noNewPrivs bool
	// openshift: the kit's directories belong to group 0 and are group
	// writable (chgrp -R 0, chmod g=u), as OpenShift images make them
	// for an arbitrary uid in group root.
	openshift bool
}

// Paths Docker masks and makes read-only in every container (moby's
// oci.DefaultSpec); containerd's default spec for Kubernetes has the
// same.
var (
	dockerMasked = []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
	dockerReadonly = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// Where the bundle puts things inside the container.
const (
	binDir      = "/opt/glovebox/bin"
	manifestIn  = "/etc/glovebox/glovebox.json"
	containerPS = "glovebox-plat-"
)

// startContainer lays out a root file system (busybox for /bin/sh and
// tools, passwd, the box's directories, the manifest; the binaries bound
// read-only at /opt/glovebox/bin), writes config.json from `runc spec`
// with c's edits, and runs the kit as the container's process. The
// container shares this machine's network namespace, so that the client
// reaches the kit over loopback and sessions see the test host's route.
func startContainer(t *testing.T, runc, bins, key string, c container, degraded bool) *kitProc {
	t.Helper()
	bundle := t.TempDir()
	os.Chmod(bundle, 0o755)
	rootfs := filepath.Join(bundle, "rootfs")
	layOut(t, rootfs, key, c)
	port := freePort(t)
	configure(t, runc, bundle, bins, c, key, port, degraded)

	state := t.TempDir()
	id := containerPS + randomHex(t, 6)
	cmd := exec.Command(runc, "--root", state, "run", "--bundle", bundle, id)
	cmd.Stdin = nil
	// Registered before startProcess's cleanup, so it runs after it:
	// the container is deleted whatever happened.
	t.Cleanup(func() {
		out, err := exec.Command(runc, "--root", state, "delete", "--force", id).CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("does not exist")) {
			t.Errorf("runc delete --force %s: %v\n%s", id, err, out)
		}
	})
	exited, log := startProcess(t, cmd, bundle)
	return &kitProc{port: port, key: key, attacker: binDir + "/attacker", exited: exited, log: log}
}

func layOut(t *testing.T, rootfs, key string, c container) {
	t.Helper()
	mkdir := func(dir string, mode os.FileMode, uid, gid int) {
		p := filepath.Join(rootfs, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, data []byte, mode os.FileMode) {
		p := filepath.Join(rootfs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	mkdir("/", 0o755, 0, 0)
	for _, d := range []string{"/bin", "/etc", "/opt/glovebox/bin", "/proc", "/sys", "/dev", "/var", "/usr/bin"} {
		mkdir(d, 0o755, 0, 0)
	}
	mkdir("/tmp", 0o1777, 0, 0)
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	write("/bin/busybox", bb, 0o755)
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	for _, name := range strings.Fields(string(list)) {
		if name != "busybox" {
			os.Symlink("busybox", filepath.Join(rootfs, "bin", name))
		}
	}
	write("/etc/passwd", []byte("root:x:0:0:root:/var/empty:/bin/sh\nglovebox:x:10001:10001::/work:/bin/sh\nnobody:x:65534:65534::/var/empty:/bin/sh\n"), 0o644)
	write("/etc/group", []byte("root:x:0:\nglovebox:x:10001:\nnogroup:x:65534:\n"), 0o644)
	write(manifestIn, manifest(key, false), 0o444)
	// The box's directories, as the image makes them: owned by the
	// image's user (root, or glovebox 10001); for an arbitrary uid,
	// group root and group writable.
	owner, group, mode := c.uid, c.gid, os.FileMode(0o755)
	if c.openshift {
		owner, group, mode = 0, 0, 0o775
	}
	for _, d := range []string{"/work", "/input", "/output", "/var/glovebox"} {
		mkdir(d, mode, owner, group)
	}
}

// configure writes bundle/config.json: runc's default spec, then the
// platform's process (user, capabilities, no_new_privs, seccomp), Docker's
// masked and read-only /proc paths, a memory and pids limit for the
// container, the host's network namespace, and the binaries bound in.
func configure(t *testing.T, runc, bundle, bins string, c container, key string, port int, degraded bool) {
	t.Helper()
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	path := filepath.Join(bundle, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("runc spec: %v", err)
	}
	env := []string{"PATH=/bin:/usr/bin", "GLOVEBOX_MANIFEST=" + manifestIn, "GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=" + strconv.Itoa(port)}
	if degraded {
		env = append(env, "GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1")
	}
	caps := c.caps
	if caps == nil {
		caps = []string{}
	}
	capSet := map[string]any{"bounding": caps, "effective": []string{}, "permitted": []string{}}
	if c.uid == 0 {
		// Root holds its set; another user gets it in the bounding set
		// only (Docker, containerd).
		capSet["effective"], capSet["permitted"] = caps, caps
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["user"] = map[string]any{"uid": c.uid, "gid": c.gid}
	proc["capabilities"] = capSet
	proc["noNewPrivileges"] = c.noNewPrivs
	proc["args"] = []string{binDir + "/glovebox-kit"}
	proc["env"] = env
	proc["cwd"] = "/"
	spec["root"] = map[string]any{"path": "rootfs", "readonly": false}
	mounts := spec["mounts"].([]any)
	mounts = append(mounts, map[string]any{"destination": binDir, "type": "bind", "source": bins, "options": []string{"rbind", "ro", "nosuid", "nodev"}})
	spec["mounts"] = mounts
	linux := spec["linux"].(map[string]any)
	var namespaces []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" {
			namespaces = append(namespaces, ns)
		}
	}
	linux["namespaces"] = namespaces
	linux["maskedPaths"] = dockerMasked
	linux["readonlyPaths"] = dockerReadonly
	linux["resources"] = map[string]any{
		"devices": []any{map[string]any{"allow": false, "access": "rwm"}},
		"memory":  map[string]any{"limit": 2 << 30},
		"pids":    map[string]any{"limit": 4096},
	}
	if c.seccomp != nil {
		linux["seccomp"] = c.seccomp
	} else {
		delete(linux, "seccomp")
	}
	data, err = json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// isolation reads /environment's isolation report with the key.
func isolation(ctx context.Context, k *kitProc) (*protocol.Isolation, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+k.base()+"/environment", nil)
	req.Header.Set("Authorization", "Bearer "+k.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env protocol.Environment
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("/environment: %w", err)
	}
	if env.Isolation == nil {
		return nil, errors.New("/environment has no isolation report")
	}
	return env.Isolation, nil
}
