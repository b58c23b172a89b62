package generator

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubernetesKeyForm starts the real glovebox-kit binary on a generated
// dist/ with GLOVEBOX_KEY exactly as `kubectl create secret generic NAME
// --from-file=GLOVEBOX_KEY=dist/glovebox.key` sets it: the file's bytes,
// trailing newline included (kubectl keeps a file's contents as they are).
// The kit boots, and clients authenticate with the key as `$(cat
// glovebox.key)` gives it, without the newline. Before the kit trimmed
// that newline, it refused to boot ("GLOVEBOX_KEY does not match the
// manifest's key_fingerprint") and the pod crash-looped. Two newlines are
// no key file's: that still fails.
func TestKubernetesKeyForm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds glovebox-kit")
	}
	t.Parallel()
	work := t.TempDir()
	kit := filepath.Join(work, "glovebox-kit")
	if out, err := exec.Command("go", "build", "-o", kit, "github.com/glovebox-dev/glovebox/cmd/glovebox-kit").CombinedOutput(); err != nil {
		t.Fatalf("go build glovebox-kit: %v\n%s", err, out)
	}
	c, err := Parse("glovebox.toml", []byte("name = \"keyform\"\n[sandbox]\nallow_degraded = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(c, Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(work, "dist")
	if _, err := Write(dist, res.Files); err != nil {
		t.Fatal(err)
	}
	keyFile, err := os.ReadFile(filepath.Join(dist, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(keyFile) != testKey+"\n" {
		t.Fatalf("glovebox.key = %q, want the key and one newline", keyFile)
	}

	t.Run("from-file", func(t *testing.T) {
		port, stderr, _ := startKit(t, kit, dist, string(keyFile))
		if port == "" {
			t.Fatalf("the kit did not serve with GLOVEBOX_KEY as kubectl --from-file sets it:\n%s", stderr)
		}
		for _, tc := range []struct {
			path, bearer string
			want         int
		}{
			{"/health", "", http.StatusOK},
			{"/sessions", testKey, http.StatusOK},
			{"/sessions", testKey[:len(testKey)-1], http.StatusUnauthorized},
			{"/sessions", "wrong", http.StatusUnauthorized},
		} {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://127.0.0.1:"+port+tc.path, nil)
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s with bearer %q = %d, want %d", tc.path, tc.bearer, resp.StatusCode, tc.want)
			}
		}
	})
	t.Run("two newlines", func(t *testing.T) {
		port, stderr, cmd := startKit(t, kit, dist, testKey+"\n\n")
		if port != "" {
			t.Fatalf("the kit served with a key and two newlines:\n%s", stderr)
		}
		cmd.Wait()
		if !strings.Contains(stderr.String(), "GLOVEBOX_KEY does not match the manifest's key_fingerprint") {
			t.Errorf("stderr:\n%s", stderr)
		}
	})
}

// startKit starts the kit built at kit on the manifest in dist with
// GLOVEBOX_KEY set to env, and returns the port it serves on ("" when it
// exited before serving), its stderr so far, and its command.
func startKit(t *testing.T, kit, dist, env string) (port string, stderr *bytes.Buffer, cmd *exec.Cmd) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	cmd = exec.CommandContext(ctx, kit, "--manifest", filepath.Join(dist, ManifestFile), "--root", t.TempDir())
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GLOVEBOX_PORT=0", "GLOVEBOX_INIT=off", "GLOVEBOX_KEY=" + env}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	stderr = &bytes.Buffer{}
	addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
			go func() {
				for sc.Scan() {
				}
			}()
			break
		}
	}
	return port, stderr, cmd
}
