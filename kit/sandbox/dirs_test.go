//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenSessionDirectories: OpenSession makes a session's directory
// under each root, its uid's alone (mode 0700), or uses the roots
// themselves when sessions share them; a symbolic link planted in a
// session's place is refused, not followed; Close removes what it made.
func TestOpenSessionDirectories(t *testing.T) {
	b := newBox(t, Config{})
	b.sb.Close()
	work, out := filepath.Join(b.root, "work"), filepath.Join(b.root, "output")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := New(Config{Hide: []string{b.state, work, out}, SessionRoots: []string{work, "", out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	id := fmt.Sprintf("s%d", time.Now().UnixNano())
	ss, err := sb.OpenSession(id)
	if err != nil {
		t.Fatal(err)
	}
	dirs := ss.Dirs()
	if want := []string{filepath.Join(work, id), "", filepath.Join(out, id)}; fmt.Sprint(dirs) != fmt.Sprint(want) {
		t.Fatalf("Dirs = %q, want %q", dirs, want)
	}
	for _, d := range []string{dirs[0], dirs[2]} {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil || int(st.Uid) != ss.UID() || st.Mode&0o7777 != 0o700 {
			t.Errorf("%s: uid %d mode %o (%v), want the session's uid %d, mode 700", d, st.Uid, st.Mode&0o7777, err, ss.UID())
		}
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dirs[0], dirs[2]} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s after Close: %v, want it gone", d, err)
		}
	}

	// A link in the session's place, to a directory outside.
	elsewhere := filepath.Join(b.root, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	planted := fmt.Sprintf("p%d", time.Now().UnixNano())
	if err := os.Symlink(elsewhere, filepath.Join(work, planted)); err != nil {
		t.Fatal(err)
	}
	if ss, err := sb.OpenSession(planted); err == nil {
		ss.Close()
		t.Errorf("OpenSession over a symbolic link succeeded, want it refused")
	}
	if st, err := os.Stat(elsewhere); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the link's target: %v, %v; want it untouched (0755)", st.Mode(), err)
	}
	if _, err := sb.OpenSession("../x"); err == nil {
		t.Errorf("OpenSession(../x) succeeded, want it refused")
	}

	shared, err := New(Config{SharedDirs: true, SessionRoots: []string{work}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	ss, err = shared.OpenSession(id)
	if err != nil {
		t.Fatal(err)
	}
	if got := ss.Dirs(); len(got) != 1 || got[0] != work {
		t.Errorf("a shared session's Dirs = %q, want the root %s", got, work)
	}
	ss.Close()
	if _, err := os.Stat(work); err != nil {
		t.Errorf("the shared root after Close: %v, want it kept", err)
	}
}

// TestReleaseKeepsTheDirectoriesAndOpenTakesThemOver: Release leaves a
// session's directories; OpenSession of the same id takes them over and
// gives what they hold to the new session's uid, through no link and no
// hard-linked file.
func TestReleaseKeepsTheDirectoriesAndOpenTakesThemOver(t *testing.T) {
	b := newBox(t, Config{})
	b.sb.Close()
	work := filepath.Join(b.root, "work")
	sb, err := New(Config{Hide: []string{b.state, work}, SessionRoots: []string{work, "", ""}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	id := fmt.Sprintf("k%d", time.Now().UnixNano())
	ss, err := sb.OpenSession(id)
	if err != nil {
		t.Fatal(err)
	}
	dir := ss.Dirs()[0]
	if out, st := run(t, ss, dir, "mkdir -p a/b && echo kept > a/b/f && ln -s /etc/passwd link && echo x > linked && echo ok"); st.Code != 0 {
		t.Fatalf("%s %v", out, st)
	}
	if err := ss.Release(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a/b/f")); err != nil || string(b) != "kept\n" {
		t.Fatalf("after Release: %q, %v", b, err)
	}
	// As if another uid had made them (a kit before a restart).
	for _, p := range []string{"a", "a/b", "a/b/f", "linked"} {
		if err := os.Lchown(filepath.Join(dir, p), 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(b.root, "outside")
	if err := os.Link(filepath.Join(dir, "linked"), outside); err != nil {
		t.Fatal(err)
	}
	ss2, err := sb.OpenSession(id)
	if err != nil {
		t.Fatal(err)
	}
	defer ss2.Close()
	for _, p := range []string{"a", "a/b", "a/b/f"} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, p), &st); err != nil || int(st.Uid) != ss2.UID() {
			t.Errorf("%s: uid %d (%v), want the new session's %d", p, st.Uid, err, ss2.UID())
		}
	}
	var st syscall.Stat_t
	if syscall.Stat("/etc/passwd", &st); st.Uid != 0 {
		t.Errorf("/etc/passwd was given away through the link: uid %d", st.Uid)
	}
	if syscall.Stat(outside, &st); st.Uid != 4242 {
		t.Errorf("a hard-linked file was given away: uid %d", st.Uid)
	}
	if out, st := run(t, ss2, dir, "echo more >> a/b/f && cat a/b/f"); st.Code != 0 || out != "kept\nmore\n" {
		t.Errorf("the new session with the old files: %q %v", out, st)
	}
}
