//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// buildSupervisor builds cmd/glovebox-sandbox into dir, linked with tag as
// its buildTag ("" for the same version as this test binary).
func buildSupervisor(t testing.TB, dir, tag string) string {
	t.Helper()
	out := filepath.Join(dir, SupervisorName)
	args := []string{"build", "-o", out}
	if tag != "" {
		args = append(args, "-ldflags", "-X github.com/glovebox-dev/glovebox/kit/sandbox.buildTag="+tag)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/glovebox-dev/glovebox/cmd/glovebox-sandbox")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/glovebox-sandbox (within 5m): %v\n%s", err, b)
	}
	return out
}

var (
	goodOnce sync.Once
	goodBin  []byte
)

// supervisorDir returns a new directory (mode 0755) holding a
// glovebox-sandbox of this test binary's version, built once per run.
func supervisorDir(t testing.TB) string {
	t.Helper()
	goodOnce.Do(func() {
		d, err := os.MkdirTemp("", "glovebox-sandbox-build-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
		goodBin, _ = os.ReadFile(buildSupervisor(t, d, ""))
	})
	if len(goodBin) == 0 {
		t.Fatal("no glovebox-sandbox was built")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SupervisorName), goodBin, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// boxWith is newBox with the supervisor looked for in dir; it returns the
// box and what the sandbox logged.
func boxWith(t testing.TB, cfg Config, dir string) (*box, *bytes.Buffer) {
	t.Helper()
	b := newBox(t, Config{Off: true})
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg.Hide = append(cfg.Hide, b.state, b.parent)
	sb, err := newSandbox(cfg, log, dir)
	if err != nil {
		t.Fatal(err)
	}
	b.sb = sb
	return b, &logs
}

// supervisorExe is the program a session's supervisor runs, after a
// command of the session ran.
func supervisorExe(t *testing.T, b *box) string {
	t.Helper()
	ss, dir := b.session(t, "sup")
	if out, st := run(t, ss, dir, "echo ran"); st.Code != 0 || out != "ran\n" {
		t.Fatalf("a command of the session: %q, %v", out, st)
	}
	pid := ss.SupervisorPid()
	if pid == 0 {
		t.Fatal("the session has no supervisor running")
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestSiblingSupervisor: a trusted glovebox-sandbox beside the program
// runs every supervisor, with every layer and with the sandbox off.
func TestSiblingSupervisor(t *testing.T) {
	for _, cfg := range []Config{{}, {Off: true}} {
		t.Run(fmt.Sprintf("off=%v", cfg.Off), func(t *testing.T) {
			dir := supervisorDir(t)
			want := filepath.Join(dir, SupervisorName)
			b, logs := boxWith(t, cfg, dir)
			if got := b.sb.Supervisor(); got != want {
				t.Fatalf("Supervisor() = %q, want %q; log:\n%s", got, want, logs)
			}
			if !strings.Contains(logs.String(), "sandbox: supervisor: "+want+" (installed beside the kit)") || strings.Contains(logs.String(), "WARN") {
				t.Errorf("the boot log does not name the sibling as supervisor:\n%s", logs)
			}
			if !cfg.Off && !b.sb.Report().Has(LayerMount) {
				t.Errorf("with the sibling, the mount layer is not in force: %v", b.sb.Report())
			}
			if got := supervisorExe(t, b); got != want {
				t.Errorf("the session's supervisor runs %s, want %s", got, want)
			}
		})
	}
}

// TestSiblingRefused: a sibling that someone other than root or the kit's
// user could have written, or that is not a plain file, is never run; the
// program itself serves, and the boot log says why.
func TestSiblingRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir, bin string)
		why   string
	}{
		{"group-writable", func(t *testing.T, _, bin string) { chmod(t, bin, 0o775) }, "is writable by its group or others"},
		{"world-writable", func(t *testing.T, _, bin string) { chmod(t, bin, 0o757) }, "is writable by its group or others"},
		{"foreign owner", func(t *testing.T, _, bin string) { chown(t, bin, 4242) }, "is owned by uid 4242"},
		{"directory writable by others", func(t *testing.T, dir, _ string) { chmod(t, dir, 0o777) }, "directory " + "DIR" + " is writable by its group or others"},
		{"directory of a foreign owner", func(t *testing.T, dir, _ string) { chown(t, dir, 4242) }, "is owned by uid 4242"},
		{"not executable", func(t *testing.T, _, bin string) { chmod(t, bin, 0o644) }, "is not executable"},
		{"symbolic link", func(t *testing.T, dir, bin string) {
			real := filepath.Join(dir, "real-supervisor")
			if err := os.Rename(bin, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, bin); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"directory", func(t *testing.T, _, bin string) {
			if err := os.Remove(bin); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := supervisorDir(t)
			tc.spoil(t, dir, filepath.Join(dir, SupervisorName))
			b, logs := boxWith(t, Config{}, dir)
			if got := b.sb.Supervisor(); got != "" {
				t.Fatalf("Supervisor() = %q, want the program itself", got)
			}
			why := strings.ReplaceAll(tc.why, "DIR", dir)
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "refused "+SupervisorName) || !strings.Contains(logs.String(), why) {
				t.Errorf("the boot log does not warn that the sibling was refused because it %s:\n%s", why, logs)
			}
			if got, want := supervisorExe(t, b), testkit.Executable(t); got != want {
				t.Errorf("the session's supervisor runs %s, want the program itself (%s)", got, want)
			}
		})
	}
}

// TestNoSibling: without a sibling the program itself serves, said
// without a warning.
func TestNoSibling(t *testing.T) {
	b, logs := boxWith(t, Config{}, t.TempDir())
	if got := b.sb.Supervisor(); got != "" {
		t.Fatalf("Supervisor() = %q, want the program itself", got)
	}
	if !strings.Contains(logs.String(), "the kit's own binary (no "+SupervisorName+" in ") || strings.Contains(logs.String(), "WARN") {
		t.Errorf("the boot log does not say, without a warning, that the program itself serves:\n%s", logs)
	}
	if got, want := supervisorExe(t, b), testkit.Executable(t); got != want {
		t.Errorf("the session's supervisor runs %s, want %s", got, want)
	}
}

// TestStaleSibling: a sibling of another version (a build of other
// source, an upgrade half done) fails the boot probe; the box falls back
// to the program itself, with every layer it would have had, and warns.
func TestStaleSibling(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	buildSupervisor(t, dir, "stale")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"every layer", Config{}},
		{"sandbox off", Config{Off: true}},
		{"no namespace", Config{NoMount: true, NoPID: true, NoNetwork: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			b, logs := boxWith(t, cfg, dir)
			if got := b.sb.Supervisor(); got != "" {
				t.Fatalf("Supervisor() = %q, want the program itself; log:\n%s", got, logs)
			}
			failed := "failed the boot probe"
			if cfg.Off { // no probe: the first session's supervisor checks it
				failed = "failed its check"
			}
			for _, want := range []string{"level=WARN", failed, "+stale", "install the " + SupervisorName + " built with this kit"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the boot log lacks %q:\n%s", want, logs)
				}
			}
			if !cfg.Off && !cfg.NoMount && !b.sb.Report().Has(LayerMount) {
				t.Errorf("after the fallback, the mount layer is not in force: %v", b.sb.Report())
			}
			if got, want := supervisorExe(t, b), testkit.Executable(t); got != want {
				t.Errorf("the session's supervisor runs %s, want the program itself (%s)", got, want)
			}
		})
	}
}

// TestSupervisorByHand: run by hand, glovebox-sandbox says what it is.
func TestSupervisorByHand(t *testing.T) {
	bin := filepath.Join(supervisorDir(t), SupervisorName)
	var stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("glovebox-sandbox run by hand: %v, want exit status 2", err)
	}
	if want := "version " + Version() + "): the kit starts it"; !strings.Contains(stderr.String(), want) {
		t.Errorf("glovebox-sandbox run by hand says %q, want it to contain %q", stderr.String(), want)
	}
}

// TestVersion: the version is specVersion and a digest of the messages'
// shapes, so that a change to them changes it.
func TestVersion(t *testing.T) {
	if v := Version(); !strings.HasPrefix(v, fmt.Sprint(specVersion)+".") || strings.ContainsAny(v, " \n") {
		t.Errorf("Version() = %q, want %d.<digest> without spaces", v, specVersion)
	}
	var a, b bytes.Buffer
	type spec1 struct {
		A string `json:"a"`
	}
	type spec2 struct {
		A string `json:"b"`
	}
	describeType(&a, reflect.TypeOf(spec1{}), 0)
	describeType(&b, reflect.TypeOf(spec2{}), 0)
	if a.String() == b.String() {
		t.Errorf("two shapes that differ by a tag describe alike: %q", a.String())
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// TestSandboxOffChecksTheSiblingLater: with the sandbox off no probe runs
// at boot, so the sibling is not started before the box serves; the first
// session's supervisor checks it, and a stale one is dropped then, with
// the warning, and the program itself runs the session.
func TestSandboxOffChecksTheSiblingLater(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	buildSupervisor(t, dir, "stale")
	b, logs := boxWith(t, Config{Off: true}, dir)
	if strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "checked by the first session's supervisor") {
		t.Fatalf("the boot, with the sandbox off, checked the sibling or did not say it would later:\n%s", logs)
	}
	if got, want := supervisorExe(t, b), testkit.Executable(t); got != want {
		t.Errorf("the session's supervisor runs %s, want the program itself (%s)", got, want)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "failed its check") {
		t.Errorf("the first session dropped the stale sibling without the warning:\n%s", logs)
	}
}
