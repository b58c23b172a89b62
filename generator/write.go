package generator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return changed, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
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

// maxKey bounds a box key's length.
const maxKey = 4096

// CheckKey reports a key the kit would not accept or that glovebox.key
// cannot hold: the kit takes any non-empty key (v1 projects have 64-hex
// keys, ours are 43 characters of base64url); a key file holds one line.
func CheckKey(key string) error {
	switch {
	case strings.TrimSpace(key) == "":
		return errors.New("the box key is empty")
	case key != strings.TrimSpace(key):
		return errors.New("the box key starts or ends with white space")
	case len(key) > maxKey:
		return fmt.Errorf("the box key is %d bytes, more than %d", len(key), maxKey)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errors.New("the box key holds a control character (a key is one line of text)")
	}
	return nil
}

// Key is the box key generate uses, and where it came from.
type Key struct {
	// Value is the key; empty when no key is at hand and a check compares
	// with Fingerprint, the one the committed manifest names.
	Value       string
	Fingerprint string
	// RunsPublicKey is the committed manifest's runs.public_key, when
	// there is no key (Source "manifest").
	RunsPublicKey string
	// Source says where the key came from: "glovebox.key", "GLOVEBOX_KEY",
	// "new", "rotated" or "manifest" (no key, the manifest's fingerprint).
	Source string
}

// ResolveKey finds the box key for dir (the output directory): the
// environment's GLOVEBOX_KEY (env) or dir/glovebox.key, which must agree
// when both are there. A new key is made only when neither holds one and
// no committed dir/glovebox.json names a fingerprint, or when rotate is
// set (then env, when set, is the new key). Without a key, a manifest's
// fingerprint is an error for generate, which would otherwise rotate the
// key silently, and the thing to compare with for check; a key whose
// fingerprint is not the manifest's is an error for generate too.
func ResolveKey(dir, env string, rotate, check bool) (Key, error) {
	keyPath, manifestPath := filepath.Join(dir, KeyFile), filepath.Join(dir, ManifestFile)
	env = strings.TrimSpace(env)
	if env != "" {
		if err := CheckKey(env); err != nil {
			return Key{}, fmt.Errorf("GLOVEBOX_KEY: %w", err)
		}
	}
	if rotate {
		k := Key{Value: env, Source: "rotated"}
		if k.Value == "" {
			k.Value = protocol.NewKey()
		}
		k.Fingerprint = protocol.Fingerprint(k.Value)
		return k, nil
	}
	committed, err := manifestFingerprint(manifestPath)
	if err != nil {
		return Key{}, err
	}
	var file string
	switch data, err := os.ReadFile(keyPath); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Key{}, fmt.Errorf("read key: %w", err)
	default:
		file = strings.TrimSpace(string(data))
		if file != "" {
			if err := CheckKey(file); err != nil {
				return Key{}, fmt.Errorf("%s: %w: fix it, or pass --rotate-key to replace it", keyPath, err)
			}
		}
	}
	k := Key{Value: file, Source: KeyFile}
	switch {
	case env != "" && file != "" && env != file:
		return Key{}, fmt.Errorf("GLOVEBOX_KEY and %s hold different keys: unset GLOVEBOX_KEY, or remove %s to use it", keyPath, keyPath)
	case env != "":
		k = Key{Value: env, Source: "GLOVEBOX_KEY"}
	}
	switch {
	case k.Value == "" && committed == "":
		k = Key{Value: protocol.NewKey(), Source: "new"}
	case k.Value == "" && check:
		return Key{Fingerprint: committed, RunsPublicKey: manifestRunsKey(manifestPath), Source: "manifest"}, nil
	case k.Value == "":
		return Key{}, fmt.Errorf("%s names the key with fingerprint %s, but %s is not here (it is kept out of git): put that key in %s or GLOVEBOX_KEY, or pass --rotate-key to make a new one and redeploy with it", manifestPath, committed, keyPath, keyPath)
	case committed != "" && protocol.Fingerprint(k.Value) != committed && !check:
		return Key{}, fmt.Errorf("the key from %s has fingerprint %s, but %s names %s: use the key the deployed box has, or pass --rotate-key to adopt this one (GLOVEBOX_KEY) or a new one", k.Source, protocol.Fingerprint(k.Value), manifestPath, committed)
	}
	k.Fingerprint = protocol.Fingerprint(k.Value)
	return k, nil
}

// manifestFingerprint returns the key_fingerprint of the manifest at path,
// "" when there is none.
func manifestFingerprint(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read manifest: %w", err)
	}
	var m struct {
		KeyFingerprint string `json:"key_fingerprint"`
	}
	if json.Unmarshal(data, &m) != nil {
		return "", nil // not ours to judge: generate rewrites it
	}
	return m.KeyFingerprint, nil
}

// manifestRunsKey returns the runs.public_key of the manifest at path, ""
// when there is none.
func manifestRunsKey(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var m struct {
		Runs struct {
			PublicKey string `json:"public_key"`
		} `json:"runs"`
	}
	json.Unmarshal(data, &m)
	return m.Runs.PublicKey
}
