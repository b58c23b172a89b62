package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

const module = "github.com/glovebox-dev/glovebox"

// goBuild runs go build with args (within 5 minutes).
func goBuild(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s (within 5m): %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// installSupervisor builds glovebox-sandbox beside the test binary, which
// the tests run as glovebox-kit, and returns what removes it.
func installSupervisor() (func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, err
	}
	bin := filepath.Join(filepath.Dir(exe), sandbox.SupervisorName)
	if err := goBuild("-o", bin, module+"/cmd/glovebox-sandbox"); err != nil {
		return nil, err
	}
	return func() {
		os.Remove(bin)
		if builtDir != "" {
			os.RemoveAll(builtDir)
		}
	}, nil
}

// supervisorsOf returns the executables of kit pid's supervisors
// (processes named glovebox-sandbox-init), by pid.
func supervisorsOf(t *testing.T, pid int) map[int]string {
	t.Helper()
	var b []byte
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		more, _ := os.ReadFile(task)
		b = append(append(b, ' '), more...)
	}
	sups := map[int]string{}
	for _, f := range strings.Fields(string(b)) {
		child, _ := strconv.Atoi(f)
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child))
		if !strings.HasPrefix(string(cmdline), sandbox.InitName+"\x00") {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", child)); err == nil {
			sups[child] = exe
		}
	}
	return sups
}

// checkSupervisors fails the test unless kit pid has a supervisor running
// and every one runs want.
func checkSupervisors(t *testing.T, pid int, want string) {
	t.Helper()
	sups := supervisorsOf(t, pid)
	if len(sups) == 0 {
		t.Fatalf("the kit %d has no supervisor running", pid)
	}
	for sup, exe := range sups {
		if exe != want {
			t.Errorf("the kit's supervisor %d runs %s, want %s", sup, exe, want)
		}
	}
}

// siblingOfTestBinary is the glovebox-sandbox TestMain built.
func siblingOfTestBinary(t *testing.T) string {
	t.Helper()
	return filepath.Join(filepath.Dir(testkit.Executable(t)), sandbox.SupervisorName)
}

// builtDir is builtKit's directory, removed after the tests.
var builtDir string

// builtKit is glovebox-kit and glovebox-sandbox built into one directory,
// as the images install them.
var builtKit = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "glovebox-kit-bin-")
	if err != nil {
		return "", err
	}
	builtDir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return dir, goBuild("-o", dir+"/", module+"/cmd/glovebox-kit", module+"/cmd/glovebox-sandbox")
})

// kitDir is a new directory holding a copy of the built glovebox-kit and,
// if sandboxTag is not "-", a glovebox-sandbox: the built one for "", one
// linked with that build tag otherwise (another version).
func kitDir(t *testing.T, sandboxTag string) string {
	t.Helper()
	built, err := builtKit()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cp := func(name string) {
		b, err := os.ReadFile(filepath.Join(built, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp("glovebox-kit")
	switch sandboxTag {
	case "-":
	case "":
		cp(sandbox.SupervisorName)
	default:
		if err := goBuild("-o", filepath.Join(dir, sandbox.SupervisorName), "-ldflags", "-X "+module+"/kit/sandbox.buildTag="+sandboxTag, module+"/cmd/glovebox-sandbox"); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bootBinary starts dir's glovebox-kit as root serving an exec box, runs
// one prompt in a session, and returns the kit's boot log (up to its
// listen line) and its pid, with the session still open.
func bootBinary(t *testing.T, dir string) (boot string, pid int) {
	t.Helper()
	if os.Getuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("needs Linux and root, as the kit runs in its image")
	}
	key := protocol.NewKey()
	root, err := os.MkdirTemp("/var/tmp", "kit-supervisor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	cmd := exec.Command(filepath.Join(dir, "glovebox-kit"), "--manifest", writeManifest(t, key, "exec"), "--root", root)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0", "GLOVEBOX_INIT=off"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	type result struct{ boot, port string }
	got := make(chan result, 1)
	go func() {
		addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
		sc := bufio.NewScanner(stderr)
		var lines strings.Builder
		sent := false
		for sc.Scan() {
			lines.WriteString(sc.Text() + "\n")
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				got <- result{lines.String(), m[1]}
				sent = true
			}
		}
		if !sent {
			got <- result{lines.String(), ""}
		}
	}()
	r := testkit.Recv(t, got, "the kit's listen line")
	if r.port == "" {
		t.Fatalf("the kit ended before it listened:\n%s", r.boot)
	}
	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+r.port+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if got := prompt(t, c, "p1", "echo in-the-box"); got != "in-the-box\n" {
		t.Fatalf("prompt: complete %q, want %q", got, "in-the-box\n")
	}
	return r.boot, cmd.Process.Pid
}

// TestBootPicksSupervisor runs the real glovebox-kit binary installed as
// the images install it, beside glovebox-sandbox: the boot says which
// supervisor serves and why, and the session's supervisor runs that
// binary. A sibling others could have written, or of another version, is
// not run: the kit serves through its own binary and warns.
func TestBootPicksSupervisor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tag   string // the sibling's build tag; "-": none
		spoil func(t *testing.T, dir string)
		self  bool   // the kit's own binary serves
		log   string // in the boot line
		warn  bool
	}{
		{name: "sibling", log: "(installed beside the kit)"},
		{name: "no sibling", tag: "-", self: true, log: "the kit's own binary (no glovebox-sandbox in "},
		{name: "group-writable sibling", self: true, warn: true, log: "is writable by its group or others",
			spoil: func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, sandbox.SupervisorName), 0o775) }},
		{name: "foreign-owned sibling", self: true, warn: true, log: "is owned by uid 4242",
			spoil: func(t *testing.T, dir string) { os.Chown(filepath.Join(dir, sandbox.SupervisorName), 4242, 4242) }},
		{name: "stale sibling", tag: "stale", self: true, warn: true, log: "failed the boot probe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := kitDir(t, tc.tag)
			if tc.spoil != nil {
				tc.spoil(t, dir)
			}
			boot, pid := bootBinary(t, dir)
			var line string
			for l := range strings.Lines(boot) {
				if strings.Contains(l, "sandbox: supervisor: ") {
					line = l
				}
			}
			if !strings.Contains(line, tc.log) || strings.Contains(line, "WARN") != tc.warn {
				t.Errorf("boot line %q, want it to contain %q (a warning: %v); boot log:\n%s", line, tc.log, tc.warn, boot)
			}
			want := filepath.Join(dir, sandbox.SupervisorName)
			if tc.self {
				want = filepath.Join(dir, "glovebox-kit")
			}
			checkSupervisors(t, pid, want)
		})
	}
}
