package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// privateTool makes DIR/bin/NAME, a script printing "NAME ran", in a
// directory of mode mode made outside /tmp (which a session with a mount
// namespace does not share), and returns DIR/bin.
func privateTool(t *testing.T, name string, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "gbx-dev-path-")
	if err != nil {
		t.Skipf("no /var/tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho "+name+" ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestDevPathUnreachableAsRoot boots gbx dev as root with two tools on
// PATH: one under a 0700 directory, which the sessions' uids cannot
// enter, and one under a 0755 one. gbx dev warns of the first by name at
// startup; a prompt running it fails with 127 and gets a line saying why,
// and so does gbx dev's stderr; the second runs.
func TestDevPathUnreachableAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: sessions get uids of their own only under a root kit")
	}
	hidden := privateTool(t, "hiddentool", 0o700)
	open := privateTool(t, "opentool", 0o755)
	dir := writeBox(t, "name = \"pathbox\"\n")
	env := map[string]string{"PATH": hidden + ":" + open + ":/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}
	d := devUntilBanner(t, dir, env, "--no-nix")
	if !strings.Contains(d.banner, "  sandbox  users (a uid per session, ") {
		t.Fatalf("the banner does not say sessions have uids of their own:\n%s", d.banner)
	}
	want := "gbx dev: warning: PATH entry " + hidden + " is not reachable by the sessions' processes (" + filepath.Dir(hidden) + " is mode 0700, which other users cannot enter)"
	stderr := d.stderr.String()
	if !strings.Contains(stderr, want) {
		t.Errorf("gbx dev's stderr lacks %q:\n%s", want, stderr)
	}
	if strings.Contains(stderr, "PATH entry "+open) || strings.Contains(stderr, open+",") {
		t.Errorf("gbx dev warns of %s, which sessions reach:\n%s", open, stderr)
	}
	if fi, err := os.Stat(filepath.Join(dir, ".glovebox")); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("state directory: %v, %v; want mode 0711 under a root gbx dev", fi.Mode(), err)
	}

	stdout, perr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", d.url, "--key", d.key, "opentool")
	if err != nil || stdout != "opentool ran\n" {
		t.Errorf("prompt opentool = %q, %v; want it to run\n%s", stdout, err, perr)
	}
	stdout, perr, err = runGbx(t, nil, t.TempDir(), "prompt", "--url", d.url, "--key", d.key, "hiddentool")
	explained := "gbx dev: hiddentool is in " + hidden + ", which the session's processes cannot reach"
	if exitCode(err) != 127 || !strings.Contains(perr, explained) {
		t.Errorf("prompt hiddentool = %q, exit %d, stderr:\n%s\nwant exit 127 and %q", stdout, exitCode(err), perr, explained)
	}
	if !strings.Contains(d.stderr.String(), explained) {
		t.Errorf("gbx dev's stderr lacks %q:\n%s", explained, d.stderr.String())
	}
	if err := d.stop(); err != nil {
		t.Errorf("gbx dev: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	private := privateTool(t, "x", 0o700)
	public := privateTool(t, "y", 0o755)
	users := sandbox.Report{Active: []string{sandbox.LayerUsers, sandbox.LayerPrivileges}}
	mount := sandbox.Report{Active: []string{sandbox.LayerUserNS, sandbox.LayerPrivileges, sandbox.LayerMount, sandbox.LayerPID}}
	tmp := t.TempDir()
	for _, tc := range []struct {
		dir  string
		r    sandbox.Report
		want string
	}{
		{private, users, filepath.Dir(private) + " is mode 0700"},
		{private, mount, ""}, // the kit's own uid: the mode stops no one
		{public, users, ""},
		{tmp, mount, "it is under /tmp"},
		{tmp + "/../" + filepath.Base(tmp), mount, "it is under /tmp"},
		{"bin", users, "it is relative"},
		{"/nonexistent/bin", users, ""},
	} {
		got := unreachable(tc.dir, tc.r)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("unreachable(%q, %v) = %q, want %q", tc.dir, tc.r.Active, got, tc.want)
		}
	}
}

func TestDevSandboxExplain(t *testing.T) {
	t.Parallel()
	bin := privateTool(t, "mytool", 0o700)
	d := &devSandbox{report: sandbox.Report{Active: []string{sandbox.LayerUsers}}, unreachable: []pathEntry{{bin, "why"}}}
	for _, tc := range []struct {
		code   int
		stderr string
		want   bool
	}{
		{127, "/bin/sh: 1: mytool: Permission denied\n", true},
		{127, "bash: line 1: mytool: command not found\n", true},
		{0, "/bin/sh: 1: mytool: Permission denied\n", true}, // a script that went on
		{127, "/bin/sh: 1: othertool: not found\n", false},
		{1, "mytool is great\n", false},
		{127, "", false},
	} {
		got := d.explain(tc.code, tc.stderr)
		if (got != "") != tc.want || tc.want && !strings.HasPrefix(got, "gbx dev: mytool is in "+bin+",") {
			t.Errorf("explain(%d, %q) = %q, want an explanation: %v", tc.code, tc.stderr, got, tc.want)
		}
	}
}

// TestDevSandboxDegraded: the banner and the warnings say what the box
// lacks on a machine whose layers do not keep sessions apart (a non-root
// developer without user namespaces), or do not confine a [network]
// policy.
func TestDevSandboxDegraded(t *testing.T) {
	t.Parallel()
	plain := &protocol.Environment{Isolation: &protocol.Isolation{
		Active:   []string{sandbox.LayerPrivileges},
		Inactive: map[string]string{sandbox.LayerUsers: "the kit does not run as root and user namespaces are not allowed: agents run as the kit's uid"},
	}}
	d := newDevSandbox(plain, "")
	lines := d.bannerLines("")
	for _, want := range []string{
		"  sandbox  privileges\n",
		"  lacks    users (the kit does not run as root",
		"  DEGRADED sessions are not kept apart: every session runs as the kit's own uid",
		"a deployed box would refuse to start unless [sandbox] allow_degraded = true",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("banner lacks %q:\n%s", want, lines)
		}
	}
	if w := d.warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "gbx dev: warning: the sandbox is DEGRADED on this machine: sessions are not kept apart") {
		t.Errorf("warnings = %q", w)
	}

	// Kept apart by a uid each, but no network namespace and no Landlock:
	// a [network] policy is advisory.
	root := &protocol.Environment{
		Isolation: &protocol.Isolation{Active: []string{sandbox.LayerUsers, sandbox.LayerPrivileges}, UIDs: "200000-209999"},
		Network:   &protocol.EgressEnvironment{Mode: "advisory", Default: "deny"},
	}
	d = newDevSandbox(root, "")
	lines = d.bannerLines("")
	if !strings.Contains(lines, "  sandbox  users (a uid per session, 200000-209999), privileges\n") ||
		!strings.Contains(lines, "DEGRADED the [network] policy is advisory") || strings.Contains(lines, "not kept apart") {
		t.Errorf("banner:\n%s", lines)
	}
	// Every layer: nothing degraded.
	full := &protocol.Environment{Isolation: &protocol.Isolation{Active: []string{sandbox.LayerUsers, sandbox.LayerPrivileges, sandbox.LayerMount, sandbox.LayerPID, sandbox.LayerNetwork}}}
	d = newDevSandbox(full, "")
	if lines := d.bannerLines(""); strings.Contains(lines, "DEGRADED") || !strings.Contains(lines, "/tmp and /dev/shm (each session has its own)") {
		t.Errorf("banner:\n%s", lines)
	}
	if w := d.warnings(); len(w) != 0 {
		t.Errorf("warnings = %q", w)
	}
}

// TestAllowDegraded: gbx dev's and the demo's boxes opt in, without
// changing the manifest they were given.
func TestAllowDegraded(t *testing.T) {
	t.Parallel()
	off := false
	m := &protocol.Manifest{Name: "x", Sandbox: &protocol.SandboxSpec{Network: &off, Pids: 64}}
	got := allowDegraded(m)
	if !got.Sandbox.AllowDegraded || got.Sandbox.Pids != 64 || got.Sandbox.Network != &off {
		t.Errorf("allowDegraded = %+v", got.Sandbox)
	}
	if m.Sandbox.AllowDegraded {
		t.Error("allowDegraded changed the manifest it was given")
	}
	if got := allowDegraded(&protocol.Manifest{Name: "y"}); got.Sandbox == nil || !got.Sandbox.AllowDegraded {
		t.Errorf("allowDegraded without [sandbox] = %+v", got.Sandbox)
	}
}
