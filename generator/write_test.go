package generator

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteOnlyWhenChanged(t *testing.T) {
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
	old := strings.Repeat("same\n", 50) + strings.Repeat("old\n", 30)
	new := strings.Repeat("same\n", 50) + strings.Repeat("new\n", 30)
	d := shortDiff(old, new, 3)
	want := "@@ line 51 @@\n-old\n-old\n-old\n-... (27 more lines)\n+new\n+new\n+new\n+... (27 more lines)"
	if d != want {
		t.Errorf("shortDiff = %q, want %q", d, want)
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	k1, created, err := LoadKey(dir, false)
	if err != nil || !created || !keyRE.MatchString(k1) {
		t.Fatalf("LoadKey(empty) = %q, %v, %v; want a new key", k1, created, err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte(k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k2, created, err := LoadKey(dir, false)
	if err != nil || created || k2 != k1 {
		t.Errorf("LoadKey(existing) = %q, %v, %v; want the kept key %q", k2, created, err, k1)
	}
	k3, created, err := LoadKey(dir, true)
	if err != nil || !created || k3 == k1 || !keyRE.MatchString(k3) {
		t.Errorf("LoadKey(rotate) = %q, %v, %v; want a new key", k3, created, err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("not a key at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadKey(dir, false); err == nil || !strings.Contains(err.Error(), "--rotate-key") {
		t.Errorf("LoadKey(garbage) = %v, want an error naming --rotate-key", err)
	}
}

// TestDockerEntrypoint runs the jq program the Dockerfile's builder stage
// uses on an image configuration with hostile values, then runs the script
// it writes with a real shell, as Docker, Fly and Railway start it: the
// image's environment values are defaults that every variable the platform
// sets overrides, the working directory and the kit's flags arrive
// unchanged, and a command given instead of flags runs instead of the kit.
func TestDockerEntrypoint(t *testing.T) {
	jq, err := exec.LookPath("jq")
	if err != nil {
		t.Skip("jq is not on PATH (apt-get install jq to run this test)")
	}
	res := generateCase(t, filepath.Join("testdata", "hostile"), Options{})
	dockerfile := string(fileData(t, res, DockerFile))
	start := strings.Index(dockerfile, "COPY <<'JQ' /box/entrypoint.jq\n")
	end := strings.Index(dockerfile, "\nJQ\n")
	if start < 0 || end < start {
		t.Fatalf("no entrypoint.jq heredoc in the Dockerfile:\n%s", dockerfile)
	}
	program := dockerfile[start+len("COPY <<'JQ' /box/entrypoint.jq\n") : end+1]
	// The final stage declares the PATH and HOME the program compares with.
	const declared = "ENV PATH=/bin:/usr/bin HOME=/home/glovebox\n"
	if !strings.Contains(dockerfile, declared) {
		t.Fatalf("the Dockerfile's final stage lacks %q", declared)
	}

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
	data, err := marshalJSON(config)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile, progFile, script := filepath.Join(tmp, "config.json"), filepath.Join(tmp, "entrypoint.jq"), filepath.Join(tmp, "entrypoint")
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
