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
