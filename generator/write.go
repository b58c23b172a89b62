package generator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Write writes files into dir, creating it, and returns the names of the
// files whose bytes or mode changed. Each file is replaced atomically (a
// temporary file in dir, then rename) and only when it changed, so an
// unchanged tree keeps its modification times.
func Write(dir string, files []File) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	var changed []string
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		old, err := os.ReadFile(path)
		if err == nil && bytes.Equal(old, f.Data) {
			if st, err := os.Stat(path); err == nil && st.Mode().Perm() == f.Mode.Perm() {
				continue
			}
			if err := os.Chmod(path, f.Mode.Perm()); err != nil {
				return changed, fmt.Errorf("chmod %s: %w", path, err)
			}
			changed = append(changed, f.Name)
			continue
		}
		if err := writeAtomic(path, f.Data, f.Mode.Perm()); err != nil {
			return changed, err
		}
		changed = append(changed, f.Name)
	}
	return changed, nil
}

func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // a no-op after the rename
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Drift is a generated file whose bytes on disk differ from what Generate
// produced.
type Drift struct {
	Name string
	// Diff is a short line diff (at most a few lines), or a sentence such as
	// "missing" or "mode 0644, want 0600".
	Diff string
}

// Diff compares files with dir without writing, and returns one Drift per
// file that is missing, different or has the wrong mode.
func Diff(dir string, files []File) ([]Drift, error) {
	var drifts []Drift
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		old, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			drifts = append(drifts, Drift{Name: f.Name, Diff: "missing"})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if !bytes.Equal(old, f.Data) {
			d := Drift{Name: f.Name, Diff: shortDiff(string(old), string(f.Data), 8)}
			if f.Name == KeyFile {
				d.Diff = "differs (contents not shown: it is a secret)"
			}
			drifts = append(drifts, d)
			continue
		}
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() != f.Mode.Perm() {
			drifts = append(drifts, Drift{Name: f.Name, Diff: fmt.Sprintf("mode %04o, want %04o", st.Mode().Perm(), f.Mode.Perm())})
		}
	}
	return drifts, nil
}

// shortDiff shows the lines that differ between old and new, trimming the
// common head and tail, at most max lines of each side.
func shortDiff(old, new string, max int) string {
	a, b := strings.SplitAfter(old, "\n"), strings.SplitAfter(new, "\n")
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	ja, jb := len(a), len(b)
	for ja > i && jb > i && a[ja-1] == b[jb-1] {
		ja--
		jb--
	}
	var out strings.Builder
	fmt.Fprintf(&out, "@@ line %d @@\n", i+1)
	emit := func(prefix string, lines []string) {
		for n, l := range lines {
			if n == max {
				fmt.Fprintf(&out, "%s... (%d more lines)\n", prefix, len(lines)-max)
				break
			}
			out.WriteString(prefix + strings.TrimSuffix(l, "\n") + "\n")
		}
	}
	emit("-", a[i:ja])
	emit("+", b[i:jb])
	return strings.TrimSuffix(out.String(), "\n")
}

var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// LoadKey returns the box key kept in dir/glovebox.key. When the file is
// absent or empty, or rotate is set, it returns a new key and created is
// true; the caller writes it with the other files. A file that holds
// something other than a key is an error, never silently replaced.
func LoadKey(dir string, rotate bool) (key string, created bool, err error) {
	path := filepath.Join(dir, KeyFile)
	data, err := os.ReadFile(path)
	switch {
	case rotate || errors.Is(err, fs.ErrNotExist):
		return protocol.NewKey(), true, nil
	case err != nil:
		return "", false, fmt.Errorf("read key: %w", err)
	}
	key = strings.TrimSpace(string(data))
	if key == "" {
		return protocol.NewKey(), true, nil
	}
	if !keyRE.MatchString(key) {
		return "", false, fmt.Errorf("%s does not hold a box key (43 characters of A-Z a-z 0-9 _ -): fix it, or pass --rotate-key to replace it", path)
	}
	return key, false, nil
}
