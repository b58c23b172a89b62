package generator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/<case>/dist")

// testKey is a fixed box key so that golden manifests are stable.
const testKey = "b0cpHEv8MzAnVjeSSDYSxbmEyyUURYix541FimtLeY4"

// cases lists the golden boxes under testdata.
func cases(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join("testdata", e.Name(), ConfigFile)); err == nil {
			out = append(out, e.Name())
		}
	}
	if len(out) < 8 {
		t.Fatalf("found %d golden cases, want at least 8", len(out))
	}
	return out
}

func generateCase(t *testing.T, dir string, opts Options) *Result {
	t.Helper()
	c, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	if opts.Key == "" {
		opts.Key = testKey
	}
	if opts.KitVersion == "" {
		opts.KitVersion = "v0.1.0" // as a released gbx generates
	}
	if opts.NpmLock == nil {
		opts.NpmLock = lockNpm(t, c, filepath.Join(dir, "dist"))
	}
	res, err := Generate(c, opts)
	if err != nil {
		t.Fatalf("Generate(%s): %v", dir, err)
	}
	return res
}

// lockNpm is the lock of c's npm packages: the one in dist/npm when it
// is for them (committed with the golden files), else a new one from the
// npm registry; a skip when the registry cannot be reached (a failure
// when CI is set).
func lockNpm(t testing.TB, c *Config, dist string) []byte {
	t.Helper()
	prev, _ := os.ReadFile(filepath.Join(dist, NpmLockFile))
	lock, err := ResolveNpm(context.Background(), c, prev)
	if err != nil {
		needRegistry(t, err)
	}
	return lock
}

// needRegistry skips a test that must lock npm packages from the npm
// registry when npm cannot reach it (a failure when CI is set: CI has
// network).
func needRegistry(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNpmIncomplete) {
		// Not the network: the registry reached lacks packages of the
		// tree (a partial mirror), so no lock from it can be built.
		t.Skipf("the npm registry reached here lacks packages of this tree: %v", err)
	}
	msg := fmt.Sprintf("this test locks npm packages with npm from the npm registry, which failed (offline?): %v", err)
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set, so this is a failure, not a skip)")
	}
	t.Skip(msg)
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			res := generateCase(t, dir, Options{})
			// The key is checked here rather than against a golden file:
			// the generated .gitignore keeps glovebox.key out of git.
			var files []File
			for _, f := range res.Files {
				if f.Name == KeyFile {
					if string(f.Data) != testKey+"\n" || f.Mode != 0o600 {
						t.Errorf("glovebox.key = %q mode %v, want the key and 0600", f.Data, f.Mode)
					}
					continue
				}
				files = append(files, f)
			}
			warnings := ""
			for _, w := range res.Warnings {
				warnings += w + "\n"
			}
			files = append(files, File{Name: "warnings.txt", Data: []byte(warnings), Mode: 0o644})
			golden := filepath.Join(dir, "dist")
			if *update {
				if err := os.RemoveAll(golden); err != nil {
					t.Fatal(err)
				}
				if _, err := Write(golden, files); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, f := range files {
				want, err := os.ReadFile(filepath.Join(golden, f.Name))
				if err != nil {
					t.Fatalf("%v (run go test ./generator -update)", err)
				}
				if diff := cmp.Diff(string(want), string(f.Data)); diff != "" {
					t.Errorf("%s/%s mismatch (-want +got):\n%s", name, f.Name, diff)
				}
			}
			held := 0
			err := filepath.WalkDir(golden, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					held++
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if held != len(files) {
				t.Errorf("%s holds %d files, Generate made %d: run with -update", golden, held, len(files))
			}
		})
	}
}

// TestDeterministic generates every case twice, the second time from
// another working directory through a relative path, and compares bytes.
func TestDeterministic(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			abs := filepath.Join(wd, "testdata", name)
			first := generateCase(t, abs, Options{})

			other := t.TempDir()
			t.Chdir(other)
			rel, err := filepath.Rel(other, abs)
			if err != nil {
				t.Fatal(err)
			}
			second := generateCase(t, rel, Options{})
			if len(first.Files) != len(second.Files) {
				t.Fatalf("file counts differ: %d and %d", len(first.Files), len(second.Files))
			}
			for i := range first.Files {
				a, b := first.Files[i], second.Files[i]
				if a.Name != b.Name || !bytes.Equal(a.Data, b.Data) || a.Mode != b.Mode {
					t.Errorf("%s differs between runs", a.Name)
				}
				for _, leak := range []string{wd, other, os.TempDir()} {
					if bytes.Contains(a.Data, []byte(leak)) {
						t.Errorf("%s contains the machine path %q", a.Name, leak)
					}
				}
			}
		})
	}
}

func TestGenerateRejectsBadOptions(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`name = "x"`))
	if err != nil {
		t.Fatal(err)
	}
	good := pins[DefaultBranch]
	badRev, badHash := good, good
	badRev.Rev = "main"
	badHash.NarHash = "sha256-\"; evil"
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no key", Options{}, "no box key"},
		{"bad key", Options{Key: "short\nkey"}, "control character"},
		{"bad rev", Options{Key: testKey, Nixpkgs: badRev}, "40-hex"},
		{"bad hash", Options{Key: testKey, Nixpkgs: badHash}, "narHash"},
		{"bad glovebox pin", Options{Key: testKey, Glovebox: &Pin{Owner: "glovebox-dev", Repo: "glovebox"}}, "glovebox pin"},
		{"bad kit version", Options{Key: testKey, KitVersion: "main; rm -rf /"}, "kit version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Generate(c, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestEnvExampleV1Format(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml, want string
	}{
		{"no vars", `name = "x"`, "# Auth key for the glovebox server (generated by `gbx generate`: the contents of glovebox.key)\nGLOVEBOX_KEY=\n\n# Optional: override the listening port (default: $PORT, else 8080)\n# GLOVEBOX_PORT=8080\n\n# The box's public base URL, for the links of server-parked outputs\n# (default http://localhost:<port>): set it behind a public host name\n# GLOVEBOX_PUBLIC_URL=https://box.example.com\n"},
		{"vars in file order", "[env.B]\nrequired = true\nsecret = true\ndescription = \"the b\"\n[env.A]\ndefault = \"x y\"\n",
			"# Auth key for the glovebox server (generated by `gbx generate`: the contents of glovebox.key)\nGLOVEBOX_KEY=\n\n# Optional: override the listening port (default: $PORT, else 8080)\n# GLOVEBOX_PORT=8080\n\n# The box's public base URL, for the links of server-parked outputs\n# (default http://localhost:<port>): set it behind a public host name\n# GLOVEBOX_PUBLIC_URL=https://box.example.com\n\n# the b\n# (required)\n# (secret)\nB=\n\nA=\"x y\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(envExample(c))); diff != "" {
				t.Errorf("envExample mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml string
		want       []string
	}{
		{"none", `name = "x"`, nil},
		{"npx without node", "[agent]\ntype = \"acp\"\ncommand = [\"npx\", \"agent\"]\n", []string{`agent.command runs npx, but no Node.js is listed: add "nodejs_22" to packages.nix`}},
		{"npx with node", "[packages]\nnix = [\"nodejs_24\"]\n[agent]\ntype = \"acp\"\ncommand = [\"npx\", \"agent\"]\n", nil},
		{"go agent", "[agent]\ntype = \"go\"\nmain = \"./cmd/a\"\n", []string{`agent type "go": flake.nix and the Dockerfile build ./cmd/a`}},
		{"flake base", "base = \"github:acme/bases#ml\"\n", []string{`base "github:acme/bases#ml" comes from another flake, which nixpacks cannot use: nixpacks.toml installs only the common base packages and the box's own`}},
		{"custom fs", "[fs.work]\npath = \"/work\"\nwritable = true\n[fs.data]\npath = \"/data\"\nwritable = true\n", nil}, // mkBox creates the manifest's own mounts, owned by 10001
		{"development gbx", "", []string{"this gbx is a development build, not a release"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Key: testKey, KitVersion: "v0.1.0"}
			if tc.name == "development gbx" {
				opts.KitVersion = "latest"
			}
			res, err := Generate(c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Warnings) != len(tc.want) {
				t.Fatalf("Warnings = %q, want %d matching %q", res.Warnings, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(res.Warnings[i], w) {
					t.Errorf("Warnings[%d] = %q, want it to contain %q", i, res.Warnings[i], w)
				}
			}
		})
	}
}

// FuzzPreviousLock feeds arbitrary previous locks to Generate: it must
// never fail or panic because of them, and must give valid JSON.
func FuzzPreviousLock(f *testing.F) {
	c, err := Parse("glovebox.toml", []byte(`name = "x"`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"nodes":{"glovebox":{"inputs":{"nixpkgs":["nixpkgs"]},"locked":{"type":"path","path":"/x","narHash":"sha256-x"}},"nixpkgs":{},"root":{"inputs":{"glovebox":"glovebox","nixpkgs":"nixpkgs"}}},"root":"root","version":7}`))
	f.Add([]byte(`{"nodes":{"root":{"inputs":{"glovebox":"nixpkgs"}}},"root":"root","version":7}`))
	f.Add([]byte(`{"nodes":{"a":{"inputs":{"b":"a"}},"root":{"inputs":{"glovebox":"a"}}},"root":"root","version":7}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, prev []byte) {
		res, err := Generate(c, Options{Key: testKey, PreviousLock: prev})
		if err != nil {
			t.Fatalf("Generate with a previous lock: %v", err)
		}
		var l struct {
			Nodes map[string]json.RawMessage `json:"nodes"`
		}
		if err := json.Unmarshal(fileData(t, res, LockFile), &l); err != nil {
			t.Fatalf("flake.lock is not JSON: %v", err)
		}
		if _, ok := l.Nodes["nixpkgs"]; !ok {
			t.Fatal("flake.lock lost nixpkgs")
		}
	})
}

// TestFlakeBaseNixKeyword: a base named like a Nix keyword is quoted.
func TestFlakeBaseNixKeyword(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("base = \"github:acme/bases#if\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(c, Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if flake := string(fileData(t, res, FlakeFile)); !strings.Contains(flake, `base = base.lib.gloveboxBases."if";`) {
		t.Errorf("flake.nix does not quote the keyword:\n%s", flake)
	}
}

func TestPreviousLockKeepsBase(t *testing.T) {
	t.Parallel()
	prev := []byte(`{"nodes":{"base":{"inputs":{"nixpkgs":"nixpkgs_2"},"locked":{"rev":"b"}},"nixpkgs_2":{"locked":{"rev":"n2"}},"nixpkgs":{"locked":{"rev":"old"}},"root":{"inputs":{"base":"base","nixpkgs":"nixpkgs"}}},"root":"root","version":7}`)
	for _, tc := range []struct {
		name, toml string
		want       []string
	}{
		{"flake base", "base = \"github:acme/bases#ml\"\n", []string{"base", "nixpkgs", "nixpkgs_2", "root"}},
		{"built-in base", "base = \"media\"\n", []string{"nixpkgs", "root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Generate(c, Options{Key: testKey, PreviousLock: prev})
			if err != nil {
				t.Fatal(err)
			}
			var l struct {
				Nodes map[string]struct {
					Inputs map[string]string `json:"inputs"`
				} `json:"nodes"`
			}
			if err := json.Unmarshal(fileData(t, res, LockFile), &l); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sortedKeys(l.Nodes)); diff != "" {
				t.Errorf("lock nodes mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreviousLockKeepsGlovebox(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`name = "x"`))
	if err != nil {
		t.Fatal(err)
	}
	prev := []byte(`{"nodes":{"glovebox":{"inputs":{"helper":"helper","nixpkgs":["nixpkgs"]},"locked":{"rev":"r"}},"helper":{"locked":{"rev":"h"}},"stale":{},"nixpkgs":{"locked":{"rev":"old"}},"root":{"inputs":{"glovebox":"glovebox","nixpkgs":"nixpkgs"}}},"root":"root","version":7}`)
	res, err := Generate(c, Options{Key: testKey, PreviousLock: prev})
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Nodes map[string]json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal(fileData(t, res, LockFile), &l); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"glovebox", "helper", "nixpkgs", "root"}, sortedKeys(l.Nodes)); diff != "" {
		t.Errorf("lock nodes mismatch (-want +got):\n%s", diff)
	}
	if strings.Contains(string(l.Nodes["nixpkgs"]), "old") {
		t.Error("the previous lock's nixpkgs replaced the pin")
	}
	// A release pin wins over the previous lock.
	rel := Pin{Owner: "glovebox-dev", Repo: "glovebox", Rev: strings.Repeat("cd", 20), NarHash: "sha256-" + strings.Repeat("B", 43) + "=", LastModified: 1}
	res, err = Generate(c, Options{Key: testKey, PreviousLock: prev, Glovebox: &rel})
	if err != nil {
		t.Fatal(err)
	}
	if lock := string(fileData(t, res, LockFile)); strings.Contains(lock, "helper") || !strings.Contains(lock, rel.Rev) {
		t.Errorf("release pin did not replace the previous glovebox node:\n%s", lock)
	}
}

// TestStorageSecretsListed: a box whose storage policy uses s3 lists the
// AWS credentials the kit needs at boot wherever secrets are listed:
// .env.example and fly.toml's `fly secrets set` line. A box without s3
// lists none.
func TestStorageSecretsListed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		box  string
		want bool
	}{{"storage", true}, {"minimal", false}} {
		res := generateCase(t, filepath.Join("testdata", tc.box), Options{})
		env := string(fileData(t, res, EnvExampleFile))
		fly := string(fileData(t, res, FlyFile))
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if got := strings.Contains(env, "\n"+k+"=\n"); got != tc.want {
				t.Errorf("%s: .env.example lists %s: %v, want %v\n%s", tc.box, k, got, tc.want, env)
			}
			if got := strings.Contains(fly, " "+k+"=..."); got != tc.want {
				t.Errorf("%s: fly.toml's secrets line lists %s: %v, want %v", tc.box, k, got, tc.want)
			}
		}
	}
}
