package nix_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/nixtest"
	"github.com/glovebox-dev/glovebox/protocol"
)

// busybox is where Debian's busybox-static installs its static binary.
const busybox = "/bin/busybox"

// requireRunc skips the test unless it runs as root with runc and a static
// busybox; with CI set, a missing runc or busybox fails it.
func requireRunc(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("runc needs root")
	}
	_, ci := os.LookupEnv("CI")
	runc, err := exec.LookPath("runc")
	if err != nil {
		if ci {
			t.Fatal("runc is not on PATH and CI is set: install it (apt-get install -y runc)")
		}
		t.Skip("runc is not on PATH (set CI to make this a failure)")
	}
	if _, err := os.Stat(busybox); err != nil {
		if ci {
			t.Fatalf("%s: %v, and CI is set: install busybox-static (apt-get install -y busybox-static)", busybox, err)
		}
		t.Skipf("%s: %v (install busybox-static; set CI to make this a failure)", busybox, err)
	}
	return runc
}

// TestBoxRunsInRunc runs the base box's kit in a runc container laid out
// as mkBox says the image is (entrypoint, user, working directory, env,
// passwd, directories with their owners and modes, manifest), with a
// static busybox standing in for the base packages, and prompts it over a
// real socket: the kit must boot as its user, write the prompt's inputs,
// run the agent, and serve outputs from its state directory.
func TestBoxRunsInRunc(t *testing.T) {
	t.Parallel()
	runc := requireRunc(t)
	system := map[string]string{"amd64": "x86_64-linux", "arm64": "aarch64-linux"}[runtime.GOARCH]
	if system == "" {
		t.Skipf("no box for GOARCH %s", runtime.GOARCH)
	}
	box, ok := packageFacts(t)[system].Boxes["box-base"]
	if !ok {
		t.Fatalf("no packages.%s.box-base", system)
	}
	cfg := box.Config

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	key := protocol.NewKey()
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	passwd, sbomDoc := layOut(t, ctx, rootfs, box, key)

	port := freePort(t)
	configureBundle(t, ctx, runc, bundle, cfg, key, port)

	state := t.TempDir()
	id := "glovebox-" + randomHex(t)
	logPath := filepath.Join(bundle, "kit.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	kitLog := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}
	run := exec.Command(runc, "--root", state, "run", "--bundle", bundle, id)
	run.Stdin, run.Stdout, run.Stderr = nil, logFile, logFile
	if err := run.Start(); err != nil {
		t.Fatalf("runc run: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	t.Cleanup(func() {
		if out, err := exec.Command(runc, "--root", state, "delete", "--force", id).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("does not exist")) {
			t.Errorf("runc delete --force %s: %v\n%s", id, err, out)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			run.Process.Kill()
			<-exited
		}
	})

	base := "localhost:" + strconv.Itoa(port)
	waitHealthy(t, ctx, "http://"+base+"/health", exited, kitLog)

	c, err := client.New(map[string]client.Endpoint{"box": {URL: "ws://" + base + "/", Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := c.Box("box")
	if err != nil {
		t.Fatal(err)
	}
	// The SBOM the image carries, served at /sbom, and the provenance in
	// /environment.
	sbomReq, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+base+"/sbom", nil)
	sbomReq.Header.Set("Authorization", "Bearer "+key)
	sbomResp, err := http.DefaultClient.Do(sbomReq)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := io.ReadAll(sbomResp.Body)
	sbomResp.Body.Close()
	if sbomResp.StatusCode != http.StatusOK || !bytes.Equal(served, sbomDoc) {
		t.Errorf("GET /sbom = %d %q, want the image's SBOM\nkit log:\n%s", sbomResp.StatusCode, served, kitLog())
	}
	if env, err := b.Environment(ctx); err != nil || env.Provenance == nil || env.Provenance.SBOM != box.Glovebox.SBOMPath {
		t.Errorf("/environment provenance = %+v, %v; want the stamped manifest's", env, err)
	}

	const bigSize = 2 << 20
	dirs := make([]string, 0, len(box.Glovebox.Layout))
	for _, d := range box.Glovebox.Layout {
		dirs = append(dirs, d.Path)
	}
	script := strings.Join([]string{
		`echo "uid=$(id -u) gid=$(id -g) user=$(id -un) pwd=$(pwd) home=$HOME"`,
		`cat "$GLOVEBOX_INPUT/in.txt" | tr a-z A-Z > "$GLOVEBOX_OUTPUT/out.txt"`,
		`yes glovebox | head -c ` + strconv.Itoa(bigSize) + ` > "$GLOVEBOX_OUTPUT/big.txt"`,
		`ls -ld ` + strings.Join(dirs, " "),
		`ls -ln "$GLOVEBOX_INPUT/in.txt"`,
		`echo "pid1=$(tr '\0' ' ' </proc/1/cmdline)"`,
	}, "\n")
	t.Logf("prompt:\n%s", script)
	r, err := b.Prompt(ctx, script, client.PromptOptions{
		Files:         map[string]client.File{"in.txt": {Mime: "text/plain", Data: []byte("hello from the host\n")}},
		DiscardEvents: true,
	})
	if err != nil {
		t.Fatalf("Prompt: %v\nkit log:\n%s", err, kitLog())
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("prompt: %v\nkit log:\n%s", err, kitLog())
	}
	t.Logf("prompt said:\n%s", done.Message)

	// The kit starts as root (the image's User) and runs the session
	// under a uid of its own, from the start of the sandbox's range, at
	// home in its work directory.
	if wantUID, _, _ := strings.Cut(cfg.User, ":"); wantUID != "0" {
		t.Errorf("the image starts the kit as %s, want root", cfg.User)
	}
	// The session's uid is one of the first of the range: the warm
	// session's (200000), or the next when the client came before the warm
	// session was ready.
	ranAs := regexp.MustCompile(`^uid=(20000[0-3]) gid=(\d+) user=(\d+) pwd=/work/`).FindStringSubmatch(firstLine(done.Message))
	if ranAs == nil || ranAs[2] != ranAs[1] || ranAs[3] != ranAs[1] {
		t.Fatalf("the prompt ran as %q, want uid=gid=user from 200000 up, in /work/", firstLine(done.Message))
	}
	uid := ranAs[1]
	if f := strings.Fields(firstLine(done.Message)); len(f) < 5 || strings.TrimPrefix(f[4], "home=") != strings.TrimPrefix(f[3], "pwd=") {
		t.Errorf("the prompt's HOME is not its work directory: %q", firstLine(done.Message))
	}
	// The kit makes the parents of sessions' directories and its state
	// directory traversable but not listable (0711) at boot.
	layout := slices.Clone(box.Glovebox.Layout)
	for i, d := range layout {
		switch d.Path {
		case "/work", "/input", "/output", "/var/glovebox":
			layout[i].Mode = "0711"
		}
	}
	checkModes(t, done.Message, layout, passwd)
	// The entrypoint is PID 1, so the kit runs as the container's init.
	if want := "pid1=" + cfg.Entrypoint[0] + " "; !strings.Contains(done.Message, want) {
		t.Errorf("the prompt's output lacks %q: PID 1 is not the entrypoint", want)
	}
	if m := regexp.MustCompile(`(?m)^-\S+\s+\d+\s+(\d+)\s+(\d+)\s.*in\.txt$`).FindStringSubmatch(done.Message); m == nil || m[1] != uid {
		t.Errorf("ls -ln of the input = %v, want the input owned by the session's uid %s", m, uid)
	}
	// The kit says which layers the container allows it.
	if m := regexp.MustCompile(`msg="?sandbox: [^\n]*`).FindString(kitLog()); m == "" {
		t.Errorf("the kit logged no sandbox line:\n%s", kitLog())
	} else {
		t.Log(m)
	}
	attackInContainer(t, ctx, "ws://"+base+"/", key)

	if got := readOutput(t, ctx, r, "out.txt"); got != "HELLO FROM THE HOST\n" {
		t.Errorf("out.txt = %q, want the input upper-cased", got)
	}
	if ref := done.Outputs["big.txt"]; ref.Kind != protocol.KindServer {
		t.Errorf("big.txt is a %q ref, want %q (served from /files)", ref.Kind, protocol.KindServer)
	}
	want := bytes.Repeat([]byte("glovebox\n"), bigSize/9+1)[:bigSize]
	if got := readOutput(t, ctx, r, "big.txt"); got != string(want) {
		t.Errorf("big.txt: %d bytes, sha256 %x; want %d bytes, sha256 %x", len(got), sha256.Sum256([]byte(got)), len(want), sha256.Sum256(want))
	}
	c.Close()

	// SIGTERM reaches the kit through its init; both must exit 0.
	if out, err := exec.CommandContext(ctx, runc, "--root", state, "kill", id, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill %s TERM: %v\n%s", id, err, out)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("the container exited with %v after SIGTERM, want status 0\nkit log:\n%s", err, kitLog())
		}
	case <-ctx.Done():
		t.Fatalf("the container did not exit after SIGTERM\nkit log:\n%s", kitLog())
	}
	if !strings.Contains(kitLog(), "glovebox-kit stopped") {
		t.Errorf("the kit did not log a clean stop:\n%s", kitLog())
	}
}

// layOut builds the image's root file system under rootfs and returns its
// passwd as uid -> user name, and the SBOM it holds.
func layOut(t *testing.T, ctx context.Context, rootfs string, box boxFacts, key string) (passwd map[string]string, sbomDoc []byte) {
	t.Helper()
	cfg := box.Config
	mkdir := func(dir string) {
		if err := os.MkdirAll(filepath.Join(rootfs, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, data []byte, mode os.FileMode) {
		p := filepath.Join(rootfs, name)
		mkdir(filepath.Dir(name))
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	mkdir("/")
	if err := os.Chmod(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}

	// The kit, at the path the entrypoint names.
	if len(cfg.Entrypoint) != 1 || !strings.HasPrefix(cfg.Entrypoint[0], "/nix/store/") {
		t.Fatalf("Entrypoint %v, want the kit's store path", cfg.Entrypoint)
	}
	kitPath := filepath.Join(rootfs, cfg.Entrypoint[0])
	mkdir(filepath.Dir(cfg.Entrypoint[0]))
	build := exec.CommandContext(ctx, "go", "build", "-o", kitPath, "./cmd/glovebox-kit")
	build.Dir = nixtest.ModuleRoot(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/glovebox-kit: %v\n%s", err, out)
	}

	// A static busybox for /bin/sh and the tools the prompt uses.
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	write("/bin/busybox", bb, 0o755)
	list, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	for _, name := range strings.Fields(string(list)) {
		if name == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(rootfs, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}

	// passwd and group as dockerTools.fakeNss writes them, with mkBox's
	// extra lines.
	passwdLines := append(append([]string{"root:x:0:0:root user:/var/empty:/bin/sh"}, box.NSS.Passwd...), "nobody:x:65534:65534:nobody:/var/empty:/bin/sh")
	groupLines := append(append([]string{"root:x:0:"}, box.NSS.Group...), "nogroup:x:65534:")
	write("/etc/passwd", []byte(strings.Join(passwdLines, "\n")+"\n"), 0o644)
	write("/etc/group", []byte(strings.Join(groupLines, "\n")+"\n"), 0o644)
	write("/etc/nsswitch.conf", []byte("hosts: files dns\n"), 0o644)
	passwd = map[string]string{}
	for _, l := range passwdLines {
		f := strings.Split(l, ":")
		passwd[f[2]] = f[0]
	}

	// The layout, in order, with owners and modes.
	for _, d := range box.Glovebox.Layout {
		p := filepath.Join(rootfs, d.Path)
		mkdir(d.Path)
		u, g, ok := strings.Cut(d.Owner, ":")
		uid, err1 := strconv.Atoi(u)
		gid, err2 := strconv.Atoi(g)
		mode, err3 := strconv.ParseUint(d.Mode, 8, 32)
		if !ok || err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("layout entry %+v: bad owner or mode", d)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(p, uint32(mode)); err != nil {
			t.Fatalf("chmod %s %s: %v", d.Mode, p, err)
		}
	}

	// The manifest and SBOM mkBox installs from the SBOM's build, which is
	// not built here: the manifest it stamps, with the fingerprint of this
	// test's key and the provenance the build adds, and an SBOM in its
	// place.
	for _, file := range []string{box.Glovebox.ManifestPath, box.Glovebox.SBOMPath} {
		m := regexp.MustCompile(`(?m)^cp (\S+)/` + regexp.QuoteMeta(filepath.Base(file)) + ` '\.` + regexp.QuoteMeta(file) + `'$`).FindStringSubmatch(box.FakeRootCommands)
		if m == nil || m[1] != box.SBOM.Out {
			t.Fatalf("fakeRootCommands do not install %s from the SBOM's build %s:\n%s", file, box.SBOM.Out, box.FakeRootCommands)
		}
	}
	data, err := os.ReadFile(box.SBOM.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	man, err := protocol.ParseManifest(data)
	if err != nil {
		t.Fatalf("manifest %s: %v", box.SBOM.Manifest, err)
	}
	if man.AgentType() != protocol.AgentExec {
		t.Fatalf("manifest %s: agent %q, want exec", box.SBOM.Manifest, man.AgentType())
	}
	sbomDoc = []byte(`{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": []}` + "\n")
	write(box.Glovebox.SBOMPath, sbomDoc, 0o444)
	man.KeyFingerprint = protocol.Fingerprint(key)
	man.Provenance = &protocol.Provenance{
		ClosureSHA256: strings.Repeat("0", 64), ClosurePaths: 1,
		SBOM: box.Glovebox.SBOMPath, SBOMSHA256: fmt.Sprintf("%x", sha256.Sum256(sbomDoc)),
	}
	data, err = json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	write(box.Glovebox.ManifestPath, data, 0o444)
	if env := envOf(cfg.Env); env["GLOVEBOX_MANIFEST"] != box.Glovebox.ManifestPath {
		t.Errorf("Env GLOVEBOX_MANIFEST = %q, want %s", env["GLOVEBOX_MANIFEST"], box.Glovebox.ManifestPath)
	}
	return passwd, sbomDoc
}

// configureBundle writes bundle/config.json: runc's default spec with the
// image config's process, the host's network (so the kit listens on its
// loopback) and a writable root.
func configureBundle(t *testing.T, ctx context.Context, runc, bundle string, cfg imageConfig, key string, port int) {
	t.Helper()
	if out, err := exec.CommandContext(ctx, runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
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
	u, g, ok := strings.Cut(cfg.User, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("User %q, want uid:gid", cfg.User)
	}
	// The port as a platform sets it: the image sets none.
	env := append(slices.Clone(cfg.Env), "GLOVEBOX_PORT="+strconv.Itoa(port), "GLOVEBOX_KEY="+key)

	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["user"] = map[string]any{"uid": uid, "gid": gid}
	// The kit starts as root with the capabilities Docker gives a
	// container's root by default (runc spec's are narrower).
	docker := []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}
	proc["capabilities"] = map[string]any{"bounding": docker, "effective": docker, "permitted": docker}
	proc["args"] = cfg.Entrypoint
	proc["env"] = env
	proc["cwd"] = cfg.WorkingDir
	spec["root"] = map[string]any{"path": "rootfs", "readonly": false}
	linux := spec["linux"].(map[string]any)
	var namespaces []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" {
			namespaces = append(namespaces, ns)
		}
	}
	linux["namespaces"] = namespaces
	data, err = json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitHealthy polls url until the kit answers 200, failing the test with
// the kit's log if the container exits first.
func waitHealthy(t *testing.T, ctx context.Context, url string, exited chan error, kitLog func() string) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the container exited before the kit was healthy: %v\nkit log:\n%s", err, kitLog())
		case <-ctx.Done():
			t.Fatalf("%s never answered 200: %v\nkit log:\n%s", url, err, kitLog())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// checkModes checks the `ls -ld` lines of every layout directory against
// its mode and owner.
func checkModes(t *testing.T, out string, layout []layoutDir, passwd map[string]string) {
	t.Helper()
	lines := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 9 && strings.HasPrefix(f[0], "d") {
			lines[f[len(f)-1]] = f
		}
	}
	for _, d := range layout {
		f, ok := lines[d.Path]
		if !ok {
			t.Errorf("no ls -ld line for %s", d.Path)
			continue
		}
		mode, _ := strconv.ParseUint(d.Mode, 8, 32)
		u, g, _ := strings.Cut(d.Owner, ":")
		if want := modeString(uint32(mode)); f[0] != want {
			t.Errorf("%s has mode %s in the container, want %s (%s)", d.Path, f[0], want, d.Mode)
		}
		if f[2] != passwd[u] || f[3] != passwd[g] {
			t.Errorf("%s belongs to %s:%s in the container, want %s:%s (%s)", d.Path, f[2], f[3], passwd[u], passwd[g], d.Owner)
		}
	}
}

// modeString is ls's rendering of a directory with mode m.
func modeString(m uint32) string {
	const rwx = "rwxrwxrwx"
	b := []byte("d---------")
	for i := range 9 {
		if m&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	if m&syscall.S_ISVTX != 0 {
		if b[9] == 'x' {
			b[9] = 't'
		} else {
			b[9] = 'T'
		}
	}
	return string(b)
}

func readOutput(t *testing.T, ctx context.Context, r *client.Result, name string) string {
	t.Helper()
	rc, err := r.Read(ctx, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func envOf(kvs []string) map[string]string {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	return env
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// attackInContainer repeats the key and cross-session attacks inside the
// container, with whatever layers the container allows the kit: a victim
// session writes a file; an attacker session looks for the key in every
// process's environment, the kit's memory and the victim's directories.
func attackInContainer(t *testing.T, ctx context.Context, url, key string) {
	t.Helper()
	run := func(name, script string) string {
		t.Helper()
		cl, err := client.New(map[string]client.Endpoint{"box": {URL: url, Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		b, err := cl.Box("box")
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.Prompt(ctx, script, client.PromptOptions{DiscardEvents: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		done, err := r.Wait(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return done.Message
	}
	victim := run("victim", `echo victim-secret > "$GLOVEBOX_WORK/private.txt"; echo "$GLOVEBOX_WORK"`)
	vwork := strings.TrimSpace(victim)
	out := run("attacker", fmt.Sprintf(`
for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ 2>/dev/null; done | grep GLOVEBOX_KE[Y]
head -c 4096 /proc/1/mem >/dev/null 2>&1 && echo MEM-READ
ls /work 2>/dev/null
cat %s/private.txt 2>/dev/null
ls /var/glovebox 2>/dev/null
echo attack-done`, vwork))
	if !strings.Contains(out, "attack-done") {
		t.Fatalf("the attack did not run: %q", out)
	}
	for _, leak := range []string{key, "GLOVEBOX_KEY", "MEM-READ", "victim-secret", filepath.Base(vwork), "files"} {
		if strings.Contains(out, leak) {
			t.Errorf("a session in the container got %q:\n%s", leak, out)
		}
	}
}
