package kit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSessionDir: a session's directory is made under the mount's root
// and named by its real path, whether the root is reached through a
// symbolic link, was resolved at boot or not, or is shared.
func TestSessionDir(t *testing.T) {
	base := t.TempDir()
	realRoot := filepath.Join(base, "real")
	if err := os.Mkdir(realRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(realRoot, link); err != nil {
		t.Fatal(err)
	}
	resolved, err := filepath.EvalSymlinks(realRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, real, id string
		shared         bool
		want           string
	}{
		{"resolved at boot", resolved, "s1", false, filepath.Join(resolved, "s1")},
		{"not resolved at boot", "", "s2", false, filepath.Join(resolved, "s2")},
		{"shared, resolved", resolved, "s3", true, resolved},
		{"shared, not resolved", "", "s4", true, resolved},
		{"already there", resolved, "s1", false, filepath.Join(resolved, "s1")},
	} {
		got, err := sessionDir(link, c.real, c.id, c.shared)
		if err != nil || got != c.want {
			t.Errorf("%s: sessionDir = %q, %v; want %q", c.name, got, err, c.want)
			continue
		}
		if st, err := os.Stat(got); err != nil || !st.IsDir() {
			t.Errorf("%s: %s is not a directory: %v", c.name, got, err)
		}
	}
	// A session id that names a symbolic link already there is resolved,
	// not taken for a directory the kit made.
	elsewhere := filepath.Join(base, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	os.Symlink(elsewhere, filepath.Join(realRoot, "s5"))
	want, _ := filepath.EvalSymlinks(elsewhere)
	if got, err := sessionDir(link, resolved, "s5", false); err != nil || got != want {
		t.Errorf("a link in the session's place: sessionDir = %q, %v; want its target %q", got, err, want)
	}
}
