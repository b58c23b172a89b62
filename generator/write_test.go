package generator

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestWriteOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "dist")
	files := []File{{Name: "a", Data: []byte("one\n"), Mode: 0o644}, {Name: "k", Data: []byte("secret\n"), Mode: 0o600}}
	changed, err := Write(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "k"}, changed); diff != "" {
		t.Errorf("first Write changed (-want +got):\n%s", diff)
	}
	st, err := os.Stat(filepath.Join(dir, "k"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("k: %v, mode %v, want 0600", err, st.Mode())
	}
	old := time.Unix(1_000_000_000, 0)
	for _, f := range files {
		if err := os.Chtimes(filepath.Join(dir, f.Name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	changed, err = Write(dir, files)
	if err != nil || len(changed) != 0 {
		t.Fatalf("second Write = %v, %v, want nothing changed", changed, err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "a")); !st.ModTime().Equal(old) {
		t.Errorf("an unchanged file was rewritten (mtime %v)", st.ModTime())
	}

	files[0].Data = []byte("two\n")
	if err := os.Chmod(filepath.Join(dir, "k"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err = Write(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "k"}, changed); diff != "" {
		t.Errorf("Write after edits changed (-want +got):\n%s", diff)
	}
	if st, _ := os.Stat(filepath.Join(dir, "k")); st.Mode().Perm() != 0o600 {
		t.Errorf("k mode = %v, want 0600 restored", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want 2 (no temporary files left)", len(entries))
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := []File{
		{Name: "same", Data: []byte("x\n"), Mode: 0o644},
		{Name: "changed", Data: []byte("a\nb\nc\n"), Mode: 0o644},
		{Name: "missing", Data: []byte("m\n"), Mode: 0o644},
		{Name: KeyFile, Data: []byte("new\n"), Mode: 0o600},
		{Name: "mode", Data: []byte("m\n"), Mode: 0o600},
	}
	write := func(name, data string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("same", "x\n", 0o644)
	write("changed", "a\nB\nc\n", 0o644)
	write(KeyFile, "old\n", 0o600)
	write("mode", "m\n", 0o644)
	before, _ := os.ReadFile(filepath.Join(dir, "changed"))

	got, err := Diff(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	want := []Drift{
		{Name: "changed", Diff: "@@ line 2 @@\n-B\n+b"},
		{Name: "missing", Diff: "missing"},
		{Name: KeyFile, Diff: "differs (contents not shown: it is a secret)"},
		{Name: "mode", Diff: "mode 0644, want 0600"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff mismatch (-want +got):\n%s", diff)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "changed"))
	if string(before) != string(after) {
		t.Error("Diff wrote to the directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("Diff created a missing file")
	}
}

func TestShortDiffIsShort(t *testing.T) {
	t.Parallel()
	old := strings.Repeat("same\n", 50) + strings.Repeat("old\n", 30)
	new := strings.Repeat("same\n", 50) + strings.Repeat("new\n", 30)
	d := shortDiff(old, new, 3)
	want := "@@ line 51 @@\n-old\n-old\n-old\n-... (27 more lines)\n+new\n+new\n+new\n+... (27 more lines)"
	if d != want {
		t.Errorf("shortDiff = %q, want %q", d, want)
	}
}

// TestResolveKey walks ResolveKey through its cases with real files: a
// new key only when nothing names one, the kept key, GLOVEBOX_KEY, the
// committed manifest's fingerprint for a check, and refusals where
// generate would otherwise rotate the key silently.
func TestResolveKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k, err := ResolveKey(dir, "", false, false)
	if err != nil || k.Source != "new" || CheckKey(k.Value) != nil || k.Fingerprint != protocol.Fingerprint(k.Value) {
		t.Fatalf("ResolveKey(empty dir) = %+v, %v; want a new key", k, err)
	}
	key := k.Value
	write(KeyFile, key+"\n")
	write(ManifestFile, `{"key_fingerprint": "`+k.Fingerprint+`"}`)
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		name          string
		env           string
		rotate, check bool
		want          Key // Value "*" means any new key
		err           string
	}{
		{"kept", "", false, false, Key{Value: key, Fingerprint: k.Fingerprint, Source: KeyFile}, ""},
		{"same in env", key, false, false, Key{Value: key, Fingerprint: k.Fingerprint, Source: "GLOVEBOX_KEY"}, ""},
		{"other in env", hex, false, false, Key{}, "different keys"},
		{"rotate", "", true, false, Key{Value: "*", Source: "rotated"}, ""},
		{"rotate to env", hex, true, false, Key{Value: hex, Fingerprint: protocol.Fingerprint(hex), Source: "rotated"}, ""},
		{"bad env", "a\x00b", false, false, Key{}, "GLOVEBOX_KEY: the box key holds a control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveKey(dir, tc.env, tc.rotate, tc.check)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ResolveKey = %+v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if tc.want.Value == "*" {
				tc.want.Value, tc.want.Fingerprint = got.Value, protocol.Fingerprint(got.Value)
				if got.Value == key || CheckKey(got.Value) != nil {
					t.Errorf("rotated to %q, want a new key", got.Value)
				}
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveKey = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}

	// No key file, a committed manifest: check compares with its
	// fingerprint, generate refuses.
	if err := os.Remove(filepath.Join(dir, KeyFile)); err != nil {
		t.Fatal(err)
	}
	if got, err := ResolveKey(dir, "", false, true); err != nil || got != (Key{Fingerprint: k.Fingerprint, Source: "manifest"}) {
		t.Errorf("ResolveKey(check, no key) = %+v, %v; want the manifest's fingerprint", got, err)
	}
	if _, err := ResolveKey(dir, "", false, false); err == nil || !strings.Contains(err.Error(), "--rotate-key") || !strings.Contains(err.Error(), k.Fingerprint) {
		t.Errorf("ResolveKey(no key, committed manifest) = %v; want a refusal naming the fingerprint and --rotate-key", err)
	}
	if _, err := ResolveKey(dir, hex, false, false); err == nil || !strings.Contains(err.Error(), k.Fingerprint) {
		t.Errorf("ResolveKey(another key, committed manifest) = %v; want a refusal", err)
	}
	write(KeyFile, "two\nlines\n")
	if _, err := ResolveKey(dir, "", false, false); err == nil || !strings.Contains(err.Error(), "--rotate-key") {
		t.Errorf("ResolveKey(garbage) = %v, want an error naming --rotate-key", err)
	}
}

// TestGenerateWithoutKey generates with only a fingerprint (a check on a
// checkout without the key): the manifest names it and no key file is
// produced.
func TestGenerateWithoutKey(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`name = "x"`))
	if err != nil {
		t.Fatal(err)
	}
	fp := protocol.Fingerprint(testKey)
	res, err := Generate(c, Options{Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Files {
		if f.Name == KeyFile {
			t.Errorf("Generate without a key produced %s", KeyFile)
		}
	}
	if m := string(fileData(t, res, ManifestFile)); !strings.Contains(m, `"key_fingerprint": "`+fp+`"`) {
		t.Errorf("manifest lacks the fingerprint %s:\n%s", fp, m)
	}
}

// TestDockerEntrypoint runs the jq program the Dockerfile's builder stage
// uses on an image configuration with hostile values, then runs the script
// it writes with a real shell, as Docker, Fly and Railway start it: the
// image's environment values are defaults that every variable the platform
// sets overrides, the working directory and the kit's flags arrive
// unchanged, and a command given instead of flags runs instead of the kit.
func TestDockerEntrypoint(t *testing.T) {
	t.Parallel()
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("jq is not on PATH (apt-get install jq to run this test)")
	}
	program := entrypointProgram(t)

	tmp := t.TempDir()
	work := filepath.Join(tmp, "it's $(work)")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	evil := "${evil} \"q\" 'single' `id` $(id) \\back\nnewline"
	// The "kit" prints its directory, the variables and its arguments.
	kit := `printf '%s\0' "$PWD" "$EVIL" "$EQ" "$MODEL" "${GLOVEBOX_PUBLIC_URL-unset}" "$PATH" "$HOME" "$@"`
	imagePath := "/image/bin:" + filepath.Dir(sh)
	config := map[string]any{"config": map[string]any{
		"Env":        []string{"PATH=" + imagePath, "HOME=/home/box", "EVIL=" + evil, "EQ=a=b", "MODEL=image-model"},
		"WorkingDir": work,
		"Entrypoint": []string{sh, "-c", kit, "kit"},
	}}
	script, out := writeEntrypoint(t, jq, tmp, program, config)
	// What Docker passes when nothing is overridden: the final stage's ENV.
	// (sh is run by its absolute path.)
	dockerEnv := []string{"PATH=/bin:/usr/bin", "HOME=/home/glovebox"}
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"defaults", dockerEnv, []string{"--flag", "$two"},
			[]string{work, evil, "a=b", "image-model", "unset", imagePath, "/home/box", "--flag", "$two"}},
		{"platform overrides", append(dockerEnv[:2:2], "MODEL=from-fly-secrets", "EQ=", "GLOVEBOX_PUBLIC_URL=https://x.fly.dev", "EVIL=plain"), nil,
			[]string{work, "plain", "", "from-fly-secrets", "https://x.fly.dev", imagePath, "/home/box"}},
		{"PATH and HOME overridden", []string{"PATH=" + filepath.Dir(sh) + ":/custom", "HOME=/root2"}, []string{""},
			[]string{work, evil, "a=b", "image-model", "unset", filepath.Dir(sh) + ":/custom", "/root2", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(sh, append([]string{script}, tt.args...)...)
			cmd.Env = tt.env
			got, err := cmd.Output()
			if err != nil {
				t.Fatalf("sh entrypoint: %v\nscript:\n%s", err, out)
			}
			parts := strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00")
			if diff := cmp.Diff(tt.want, parts); diff != "" {
				t.Errorf("the kit saw (-want +got):\n%s\nscript:\n%s", diff, out)
			}
		})
	}
	t.Run("a command instead of the kit", func(t *testing.T) {
		cmd := exec.Command(sh, script, sh, "-c", `printf '%s|%s|%s' "$PWD" "$MODEL" "$0"`)
		cmd.Env = dockerEnv
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh entrypoint: %v", err)
		}
		if want := work + "|image-model|" + sh; string(got) != want {
			t.Errorf("docker run IMAGE sh -c ... printed %q, want %q (the command, not the kit)", got, want)
		}
	})
}

// entrypointProgram is the jq program of the hostile case's Dockerfile
// (its entrypoint.jq heredoc), checked to sit in a Dockerfile whose final
// stage declares the PATH and HOME the program compares with.
func entrypointProgram(t *testing.T) string {
	t.Helper()
	res := generateCase(t, filepath.Join("testdata", "hostile"), Options{})
	dockerfile := string(fileData(t, res, DockerFile))
	start := strings.Index(dockerfile, "COPY <<'JQ' /box/entrypoint.jq\n")
	end := strings.Index(dockerfile, "\nJQ\n")
	if start < 0 || end < start {
		t.Fatalf("no entrypoint.jq heredoc in the Dockerfile:\n%s", dockerfile)
	}
	program := dockerfile[start+len("COPY <<'JQ' /box/entrypoint.jq\n") : end+1]
	const declared = "ENV PATH=/bin:/usr/bin HOME=/home/glovebox\n"
	if !strings.Contains(dockerfile, declared) {
		t.Fatalf("the Dockerfile's final stage lacks %q", declared)
	}
	return program
}

// writeEntrypoint runs program with jq on the image configuration config
// and writes the script it prints to dir; it returns the script's path
// and text.
func writeEntrypoint(t *testing.T, jq, dir, program string, config map[string]any) (string, []byte) {
	t.Helper()
	data, err := marshalJSON(config)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile, progFile, script := filepath.Join(dir, "config.json"), filepath.Join(dir, "entrypoint.jq"), filepath.Join(dir, "entrypoint")
	if err := os.WriteFile(cfgFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(progFile, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(jq, "-r", "-f", progFile, cfgFile).Output()
	if err != nil {
		t.Fatalf("jq: %v", err)
	}
	if err := os.WriteFile(script, out, 0o555); err != nil {
		t.Fatal(err)
	}
	return script, out
}

// TestDockerfileStreamFails runs the Dockerfile's stream-and-untar lines
// in a real sh: a stream that fails midway fails the build (a pipe alone
// would report tar's status), and a whole stream passes.
func TestDockerfileStreamFails(t *testing.T) {
	t.Parallel()
	res := generateCase(t, filepath.Join("testdata", "minimal"), Options{})
	df := string(fileData(t, res, DockerFile))
	start := strings.Index(df, "{ /box/stream")
	end := strings.Index(df[start:], "; fi\n")
	if start < 0 || end < 0 {
		t.Fatalf("no stream lines in the Dockerfile:\n%s", df)
	}
	lines := df[start : start+end+5]
	dir := t.TempDir()
	tarball := filepath.Join(dir, "one.tar")
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	if out, err := exec.Command("tar", "-c", "-f", tarball, "-C", dir, "f").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		stream string
		ok     bool
	}{
		{"cat " + tarball, true},
		{"cat " + tarball + "; exit 3", false}, // a whole archive, then a failure
		{"exit 1", false},
	} {
		box := t.TempDir()
		script := filepath.Join(box, "stream")
		os.WriteFile(script, []byte("#!/bin/sh\n"+tc.stream+"\n"), 0o755)
		os.MkdirAll(filepath.Join(box, "image"), 0o755)
		prog := strings.NewReplacer("/box/", box+"/", "/image", box+"/image").Replace(lines)
		out, err := exec.Command("sh", "-eu", "-c", prog).CombinedOutput()
		if (err == nil) != tc.ok {
			t.Errorf("stream %q: err = %v, want ok %v\n%s\n%s", tc.stream, err, tc.ok, prog, out)
		}
	}
}
