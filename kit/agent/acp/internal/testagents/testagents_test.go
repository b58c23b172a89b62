package testagents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallFromTmp: a test agent in a checkout under /tmp, which a
// session's private /tmp hides, is copied where sessions see it; one
// elsewhere is used in place.
func TestInstallFromTmp(t *testing.T) {
	src, err := os.MkdirTemp("/tmp", "testagents-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "agent.mjs"), []byte("// "+src+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := installFrom(src, "tmpagent")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if Hidden(dir) || !strings.HasPrefix(dir, "/var/tmp/glovebox-acp-") {
		t.Errorf("installed at %s, want a copy under /var/tmp", dir)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "agent.mjs")); err != nil || string(data) != "// "+src+"\n" {
		t.Errorf("the copy's agent.mjs = %q, %v", data, err)
	}
	st, err := os.Stat(filepath.Dir(dir))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v, mode %v, want 0755 (sessions run as other uids)", filepath.Dir(dir), err, st.Mode().Perm())
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if Hidden(wd) {
		t.Skipf("this checkout is itself under /tmp (%s)", wd)
	}
	if in, err := installFrom(wd, "here"); err != nil || in != wd {
		t.Errorf("installFrom(%s) = %s, %v, want it in place", wd, in, err)
	}
}
