package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

var devURLRE = regexp.MustCompile(`(?m)^  url    (\S+)\n  key    (\S+)$`)

// startDev runs gbx dev DIR through Run until the test ends, and returns
// the URL and key it printed.
func startDev(t *testing.T, dir string, env map[string]string) (url, key string, stop func() (string, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var errb testkit.LogBuffer
	var out testkit.LogBuffer
	done := make(chan error, 1)
	go func() {
		err := execute(ctx, IO{Stdin: strings.NewReader(""), Stdout: io.MultiWriter(pw, &out), Stderr: &errb,
			Getenv: func(k string) string { return env[k] }, Dir: dir}, []string{"dev", "--addr", "127.0.0.1:0", "--no-nix"})
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	// A gbx dev that never prints its url ends the scan after the timeout.
	giveUp := time.AfterFunc(testkit.Timeout, func() {
		pw.CloseWithError(fmt.Errorf("gave up after %v waiting for gbx dev's url", testkit.Timeout))
	})
	sc := bufio.NewScanner(pr)
	var head strings.Builder
	for sc.Scan() {
		head.WriteString(sc.Text() + "\n")
		if m := devURLRE.FindStringSubmatch(head.String()); m != nil {
			url, key = m[1], m[2]
			break
		}
	}
	giveUp.Stop()
	go io.Copy(io.Discard, pr)
	stopped := false
	stop = func() (string, error) {
		if stopped {
			return "", nil
		}
		stopped = true
		cancel()
		err := testkit.Recv(t, done, "gbx dev to stop once its context ended")
		return out.String(), err
	}
	t.Cleanup(func() { stop() })
	if url == "" {
		_, err := stop()
		t.Fatalf("gbx dev printed no url: %v\nstdout:\n%s\nstderr:\n%s", err, head.String(), errb.String())
	}
	return url, key, stop
}

func TestDevServesGloveboxJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Generated for the deployed box's key, which gbx dev does not use.
	deployed := protocol.NewKey()
	os.WriteFile(filepath.Join(dir, "glovebox.json"), []byte(`{"name":"jsonbox","version":"2.0.0","agent":{"type":"exec"},"key_fingerprint":"`+
		protocol.Fingerprint(deployed)+`","runs":{"public_key":"`+protocol.RunPublicKey(deployed)+`"}}`), 0o644)
	url, key, stop := startDev(t, dir, nil)
	stdout, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", url, "--key", key, "echo from dev")
	if err != nil || stdout != "from dev\n" {
		t.Fatalf("prompt against gbx dev = %q, %v\n%s", stdout, err, stderr)
	}
	if got := readFile(t, filepath.Join(dir, ".glovebox", "dev.key")); strings.TrimSpace(got) != key {
		t.Errorf("dev.key = %q, want the printed key %q", got, key)
	}
	out, err := stop()
	if err != nil || !strings.HasSuffix(out, "stopped\n") {
		t.Errorf("gbx dev after cancel = %v, output %q", err, out)
	}
	// The key is kept across runs, and GLOVEBOX_KEY overrides it.
	_, key2, stop2 := startDev(t, dir, nil)
	stop2()
	if key2 != key {
		t.Errorf("second run key = %q, want the kept %q", key2, key)
	}
	_, key3, stop3 := startDev(t, dir, map[string]string{"GLOVEBOX_KEY": "from-env"})
	stop3()
	if key3 != "from-env" {
		t.Errorf("key with GLOVEBOX_KEY = %q", key3)
	}
}

func TestDevServesGloveboxTOML(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "box")
	if _, stderr, err := runGbx(t, nil, filepath.Dir(dir), "init", "box"); err != nil {
		t.Fatalf("gbx init: %v\n%s", err, stderr)
	}
	url, key, _ := startDev(t, dir, nil)
	stdout, _, err := runGbx(t, nil, t.TempDir(), "env", "--url", url, "--key", key)
	if err != nil || !strings.HasPrefix(stdout, "box ") {
		t.Errorf("env against gbx dev of an init'd box = %q, %v", stdout, err)
	}
}

func TestDevErrors(t *testing.T) {
	t.Parallel()
	_, _, err := runGbx(t, nil, t.TempDir(), "dev")
	if err == nil || !strings.Contains(err.Error(), "gbx init") {
		t.Errorf("dev in an empty dir = %v, want a hint to run gbx init", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "glovebox.json"), []byte(`{"name":"x","fs":{"work":{"path":"relative","writable":true}}}`), 0o644)
	_, _, err = runGbx(t, nil, dir, "dev", "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "fs.work.path") {
		t.Errorf("dev with a bad manifest = %v, want the problem named", err)
	}
	os.WriteFile(filepath.Join(dir, "glovebox.json"), []byte(`{"name":"x","agent":{"type":"go"}}`), 0o644)
	_, _, err = runGbx(t, nil, dir, "dev", "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "go run .") {
		t.Errorf("dev with a Go agent = %v, want a hint to go run", err)
	}
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, err := runGbx(t, nil, dir, "demo")
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []string{
		"read notes.txt from the input directory: 79 bytes",
		"numbers.txt  server",
		"shout.txt    inline",
		"saved to ./gbx-demo-output/numbers.txt",
		"Checked: shout.txt is notes.txt in capitals",
		"Stopped the box",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	if err := checkDemoOutputs(filepath.Join(dir, "gbx-demo-output")); err != nil {
		t.Error(err)
	}
	noClientGoroutines(t)
}

// TestDevRegistersS3 runs gbx dev on a box whose outputs go to s3: without
// credentials it fails naming them, as glovebox-kit does; with them (and an
// S3-compatible endpoint, a real HTTP server here) an output is PUT there.
func TestDevRegistersS3(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "glovebox.json"), []byte(`{"name":"s3box","agent":{"type":"exec"},
		"storage_policy":{"outputs":{"rules":[{"use":{"adapter":"s3","options":{"bucket":"outs"}},"when":{"always":true}}]}}}`), 0o644)
	_, _, err := runGbx(t, nil, dir, "dev", "--addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set") {
		t.Fatalf("dev with s3 and no credentials = %v, want the missing variables named", err)
	}

	var mu sync.Mutex
	var puts []string
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			puts = append(puts, r.URL.Path+"="+string(body))
			mu.Unlock()
			w.Header().Set("ETag", `"x"`)
			return
		}
		http.Error(w, "unexpected "+r.Method, http.StatusBadRequest)
	}))
	t.Cleanup(s3.Close)
	url, key, _ := startDev(t, dir, map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1",
		"AWS_ENDPOINT_URL_S3": s3.URL, "GLOVEBOX_S3_PATH_STYLE": "1",
	})
	_, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", url, "--key", key, `printf hello > "$GLOVEBOX_OUTPUT/o.txt"`)
	if err != nil {
		t.Fatalf("prompt: %v\n%s", err, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(puts) != 1 || !strings.HasPrefix(puts[0], "/outs/") || !strings.HasSuffix(puts[0], "/o.txt=hello") {
		t.Errorf("S3 PUTs = %q, want o.txt in bucket outs", puts)
	}
}

// TestDevGoAgent runs gbx dev on a box whose agent is written in Go: gbx
// builds the author's main package (a module of its own that uses this
// one) and runs it as the image would, and a prompt reaches the agent.
func TestDevGoAgent(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/box\n\ngo 1.26\n\nrequire github.com/glovebox-dev/glovebox v0.0.0\n\nreplace github.com/glovebox-dev/glovebox => " + repo + "\n",
		"go.sum": string(sum),
		"cmd/a/main.go": `package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

func main() {
	os.Exit(kit.Main(context.Background(), kit.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv},
		func(*protocol.Manifest, *slog.Logger) (agent.Agent, error) {
			return agent.Func(func(ctx context.Context, t agent.Turn) (string, error) { return "go agent heard: " + t.Text(), nil }), nil
		}))
}
`,
		"glovebox.toml": "name = \"gobox\"\n\n[agent]\ntype = \"go\"\nmain = \"./cmd/a\"\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	// On a cold build cache, compiling the kit's dependencies (SQLite among
	// them) takes minutes on two busy cores: build once first, under a
	// deadline of its own, so that gbx dev's build is the cached one whose
	// wiring this test is about.
	warm, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(warm, "go", "build", "-o", filepath.Join(t.TempDir(), "a"), "./cmd/a")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the Go agent: %v\n%s", err, out)
	}
	url, key, stop := startDev(t, dir, nil)
	stdout, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", url, "--key", key, "hello")
	if err != nil || !strings.Contains(stdout, "go agent heard: hello") {
		t.Errorf("prompt against the Go agent = %q, %v\n%s", stdout, err, stderr)
	}
	out, err := stop()
	if err != nil || !strings.HasSuffix(out, "stopped\n") {
		t.Errorf("gbx dev after cancel = %v, output %q", err, out)
	}
	// As in an image, glovebox-sandbox is built beside the agent's kit,
	// which then runs its sessions' supervisors from it.
	m := regexp.MustCompile(`(?m)^\s*state\s+(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("gbx dev did not print its state directory:\n%s", out)
	}
	for _, name := range []string{"glovebox-agent", "glovebox-sandbox"} {
		if st, err := os.Stat(filepath.Join(m[1], name)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("gbx dev built no %s in its state directory %s: %v", name, m[1], err)
		}
	}
}
