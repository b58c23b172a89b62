package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// testBox serves a real box in process for the command tests: the exec
// agent unless the manifest names another.
func testBox(t *testing.T, manifest string) (url, key string) {
	t.Helper()
	m, err := protocol.ParseManifest([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	key = protocol.NewKey()
	m.KeyFingerprint = protocol.Fingerprint(key)
	box, err := startLocalBox(context.Background(), localBoxOptions{Manifest: m, Key: key, Root: t.TempDir(),
		Addr: "127.0.0.1:0", Getenv: func(string) string { return "" },
		Logger: testkit.Logger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := box.Close(); err != nil {
			t.Errorf("close box: %v", err)
		}
	})
	return box.URL, key
}

// runGbx runs gbx through Run with env as its whole environment.
func runGbx(t *testing.T, env map[string]string, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = execute(testkit.Context(t, "gbx "+strings.Join(args, " ")), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }, Dir: dir}, args)
	return out.String(), errb.String(), err
}

func exitCode(err error) int {
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestPromptStreamsAndSaves(t *testing.T) {
	url, key := testBox(t, `{"name":"t"}`)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("attached"), 0o644)
	script := `echo "got $(cat "$GLOVEBOX_INPUT/renamed.txt")"
echo warn >&2
printf small > "$GLOVEBOX_OUTPUT/small.txt"
seq 1 250000 > "$GLOVEBOX_OUTPUT/big.txt"
exit 5`
	stdout, stderr, err := runGbx(t, nil, dir, "prompt", "--url", url, "--key", key, "-f", "renamed.txt=in.txt", "-o", "out", script)
	if got := exitCode(err); got != 5 {
		t.Fatalf("exit code = %d (%v), want 5, the remote command's status; stderr:\n%s", got, err, stderr)
	}
	if stdout != "got attached\n" {
		t.Errorf("stdout = %q, want the command's stdout", stdout)
	}
	for _, want := range []string{"warn\n", "outputs:", "big.txt", "server", "small.txt", "inline", "exit status 5"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	noClientGoroutines(t)
	if got := readFile(t, filepath.Join(dir, "out", "small.txt")); got != "small" {
		t.Errorf("saved small.txt = %q", got)
	}
	big := readFile(t, filepath.Join(dir, "out", "big.txt"))
	if !strings.HasPrefix(big, "1\n2\n") || !strings.HasSuffix(big, "\n250000\n") {
		t.Errorf("saved big.txt: %d bytes, not seq 1 250000", len(big))
	}
}

func TestPromptJSONAndFiles(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	dir := t.TempDir()
	stdout, stderr, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}, dir,
		"prompt", "--json", `echo hi; seq 1 250000 > "$GLOVEBOX_OUTPUT/big.txt"`)
	if err != nil {
		t.Fatalf("prompt --json: %v\n%s", err, stderr)
	}
	var types []string
	var complete protocol.Complete
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		m, err := protocol.DecodeServer([]byte(line))
		if err != nil {
			t.Fatalf("line %q is not a wire frame: %v", line, err)
		}
		types = append(types, protocol.TypeOf(m))
		if c, ok := m.(*protocol.Complete); ok {
			complete = *c
		}
	}
	if want := []string{"event", "event", "complete"}; strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("frame types = %v, want %v", types, want)
	}
	ref := complete.Outputs["big.txt"]
	if ref.Kind != protocol.KindServer {
		t.Fatalf("big.txt = %+v, want a server ref", ref)
	}
	// gbx files get fetches it by id, and --consume removes it.
	_, stderr, err = runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}, dir,
		"files", "get", ref.ID, "-o", "big.txt", "--consume")
	if err != nil {
		t.Fatalf("files get: %v\n%s", err, stderr)
	}
	if got := readFile(t, filepath.Join(dir, "big.txt")); int64(len(got)) != ref.Size || !strings.HasSuffix(got, "\n250000\n") {
		t.Errorf("files get wrote %d bytes, want %d", len(got), ref.Size)
	}
	_, _, err = runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}, dir, "files", "get", ref.ID)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("files get after --consume = %v, want a 404", err)
	}
	if _, _, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}, dir, "files", "get", "../etc"); err == nil || !strings.Contains(err.Error(), "file id") {
		t.Errorf("files get ../etc = %v, want a bad id error", err)
	}
}

func TestPromptDisplaySlots(t *testing.T) {
	t.Parallel()
	ask := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		v, err := turn.Ask(ctx, "confirm", map[string]string{"q": "go?"})
		var rej *agent.RejectedError
		if errors.As(err, &rej) {
			return "rejected " + string(rej.Reason), nil
		}
		return "answered " + string(v), err
	})
	m, _ := protocol.ParseManifest([]byte(`{"name":"asker"}`))
	key := protocol.NewKey()
	m.KeyFingerprint = protocol.Fingerprint(key)
	// A Go agent: serve it through the same local box, with the agent
	// swapped in.
	url := serveAgent(t, m, key, ask)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"resolve", []string{"--resolve", "confirm=true"}, "answered true"},
		{"resolve any", []string{"--resolve", `*={"x":1}`}, `answered {"x":1}`},
		{"reject all", []string{"--reject-all"}, `rejected "rejected by gbx --reject-all"`},
		{"not interactive", nil, "rejected \"no answer: gbx prompt is not interactive and no --resolve matched\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"prompt", "--url", url, "--key", key}, tc.args...)
			stdout, stderr, err := runGbx(t, nil, t.TempDir(), append(args, "anything")...)
			if err != nil {
				t.Fatalf("prompt: %v\n%s", err, stderr)
			}
			if strings.TrimSpace(stdout) != tc.want {
				t.Errorf("stdout = %q, want %q", stdout, tc.want)
			}
			if !strings.Contains(stderr, `? confirm {"q":"go?"}`) {
				t.Errorf("stderr does not show the slot:\n%s", stderr)
			}
		})
	}
}

func TestPromptBoxError(t *testing.T) {
	t.Parallel()
	fail := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		return "", &agent.Error{Code: "Custom", Err: errors.New("it broke")}
	})
	m, _ := protocol.ParseManifest([]byte(`{"name":"failer"}`))
	key := protocol.NewKey()
	m.KeyFingerprint = protocol.Fingerprint(key)
	url := serveAgent(t, m, key, fail)
	_, _, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", url, "--key", key, "x")
	var be *client.Error
	if !errors.As(err, &be) || be.Code != "Custom" || be.Message != "it broke" {
		t.Errorf("prompt error = %v, want the box's *client.Error", err)
	}
	stdout, _, err := runGbx(t, nil, t.TempDir(), "prompt", "--json", "--url", url, "--key", key, "x")
	if exitCode(err) != 1 || !strings.Contains(stdout, `"error":{"code":"Custom","message":"it broke"}`) {
		t.Errorf("prompt --json = %q, %v; want an error frame and exit 1", stdout, err)
	}
}

// serveAgent serves a box with a Go agent in process.
func serveAgent(t *testing.T, m *protocol.Manifest, key string, ag agent.Agent) string {
	t.Helper()
	box, err := startLocalBoxWith(context.Background(), localBoxOptions{Manifest: m, Key: key, Root: t.TempDir(),
		Addr: "127.0.0.1:0", Getenv: func(string) string { return "" },
		Logger: testkit.Logger(t, slog.LevelWarn)}, ag)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	return box.URL
}

func TestEndpointResolution(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"named"}`)
	cfg := t.TempDir()
	os.MkdirAll(filepath.Join(cfg, "glovebox"), 0o755)
	os.WriteFile(filepath.Join(cfg, "glovebox", "endpoints.json"), []byte(fmt.Sprintf(
		`{"inline": {"url": %q, "key": %q}, "fromenv": {"url": %q, "key_env": "MY_KEY"}, "unset": {"url": %q, "key_env": "NOPE"}}`,
		url, key, url, url)), 0o600)
	env := map[string]string{"XDG_CONFIG_HOME": cfg, "MY_KEY": key}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string
	}{
		{"box with key", env, []string{"--box", "inline"}, ""},
		{"box with key_env", env, []string{"--box", "fromenv"}, ""},
		{"env vars", map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}, nil, ""},
		{"url and key flags", nil, []string{"--url", url, "--key", key}, ""},
		{"unknown box", env, []string{"--box", "nope"}, "not in"},
		{"unset key_env", env, []string{"--box", "unset"}, "$NOPE is not set"},
		{"no endpoints file", map[string]string{"XDG_CONFIG_HOME": t.TempDir()}, []string{"--box", "x"}, "no endpoints file"},
		{"nothing", nil, nil, "which box?"},
		{"url without key", nil, []string{"--url", url}, "needs --key"},
		{"wrong key", nil, []string{"--url", url, "--key", "wrong"}, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := runGbx(t, tc.env, t.TempDir(), append([]string{"env"}, tc.args...)...)
			if tc.wantErr == "" {
				if err != nil || !strings.HasPrefix(stdout, "named 0.1.0\n") {
					t.Errorf("env = %q, %v", stdout, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("env error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	stdout, _, err := runGbx(t, nil, t.TempDir(), "health", "--url", url)
	if err != nil || stdout != "named 0.1.0: ok\n" {
		t.Errorf("health = %q, %v", stdout, err)
	}
	stdout, _, err = runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}, t.TempDir(), "env", "--json")
	var envBody protocol.Environment
	if err != nil || json.Unmarshal([]byte(stdout), &envBody) != nil || envBody.Name != "named" {
		t.Errorf("env --json = %q, %v", stdout, err)
	}
}

func TestPromptUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"prompt", "--url", "ws://x", "--key", "k", "  "},                                   // blank text
		{"prompt", "--url", "ws://x", "--key", "k"},                                         // no text and an empty stdin
		{"prompt", "--url", "ws://x", "--key", "k", "--resolve", "novalue", "t"},            // bad --resolve
		{"prompt", "--url", "ws://x", "--key", "k", "--inline-below", "1MiB", "t"},          // bad size
		{"prompt", "--url", "ws://x", "--key", "k", "-f", filepath.Join("no", "such"), "t"}, // missing file
		{"prompt", "--nope"},
	} {
		_, _, err := runGbx(t, nil, t.TempDir(), args...)
		if !errors.Is(err, ErrUsage) && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("gbx %v = %v, want a usage error", args, err)
		}
	}
}

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

// noClientGoroutines fails the test if a client connection outlived the
// command that opened it. Commands close their client before returning,
// which waits for its goroutines, so none may be left.
// noClientGoroutines checks that the client's goroutines end once the
// command returned: a goroutine that has signalled its end may still be on
// its way out, so it waits for them, and fails naming them when they stay.
func noClientGoroutines(t *testing.T) {
	t.Helper()
	var b strings.Builder
	gone := func() bool {
		b.Reset()
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		return !strings.Contains(b.String(), "glovebox/client.(*Box)")
	}
	if testkit.Poll(testkit.Context(t, "the client's goroutines to end"), gone) != nil {
		t.Errorf("client goroutines still running after the command returned:\n%s", b.String())
	}
}

func TestPromptTimeoutAborts(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	_, stderr, err := runGbx(t, nil, t.TempDir(), "prompt", "--url", url, "--key", key, "--timeout", "200ms", "echo started; sleep 30")
	if exitCode(err) != 124 || !strings.Contains(stderr, "prompt timed out after 200ms; the prompt was aborted") {
		t.Errorf("prompt --timeout = %v, stderr %q; want exit 124 and the reason", err, stderr)
	}
}

func TestPromptAsksOnTerminal(t *testing.T) {
	t.Parallel()
	ask := agent.Func(func(ctx context.Context, turn agent.Turn) (string, error) {
		v, err := turn.Ask(ctx, turn.Text(), map[string]string{"q": "well?"})
		var rej *agent.RejectedError
		if errors.As(err, &rej) {
			return "rejected " + string(rej.Reason), nil
		}
		return "answered " + string(v), err
	})
	m, _ := protocol.ParseManifest([]byte(`{"name":"asker"}`))
	key := protocol.NewKey()
	m.KeyFingerprint = protocol.Fingerprint(key)
	url := serveAgent(t, m, key, ask)
	for _, tc := range []struct{ renderer, typed, want string }{
		{"confirm", "y\n", "answered true"},
		{"confirm", "no\n", `rejected "declined"`},
		{"pick", `{"choice":2}` + "\n", `answered {"choice":2}`},
		{"pick", "plain words\n", `answered "plain words"`},
		{"pick", "", `rejected "no answer: stdin closed"`},
	} {
		t.Run(tc.renderer+" "+strings.TrimSpace(tc.typed), func(t *testing.T) {
			c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			b, _ := c.Box("b")
			var out, errb bytes.Buffer
			p := &promptRun{stdio: IO{Stdin: strings.NewReader(tc.typed), Stdout: &out, Stderr: &errb, Dir: t.TempDir()}, interactive: true}
			if err := p.run(testkit.Context(t, "the prompt's answer"), b, tc.renderer, client.PromptOptions{}, promptFlags{}); err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out.String()) != tc.want {
				t.Errorf("stdout = %q, want %q", out.String(), tc.want)
			}
			if !strings.Contains(errb.String(), `? `+tc.renderer+` {"q":"well?"}`) {
				t.Errorf("the question was not shown: %q", errb.String())
			}
		})
	}
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

// TestPromptSavesFromAnotherName: a box that calls itself by the default
// http://localhost:PORT (or any name the client does not dial) still gives
// `gbx prompt -o` its server-parked outputs: they come from /files/{id} on
// the URL the client dialled.
func TestPromptSavesFromAnotherName(t *testing.T) {
	t.Parallel()
	m, err := protocol.ParseManifest([]byte(`{"name":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	key := protocol.NewKey()
	m.KeyFingerprint = protocol.Fingerprint(key)
	box, err := startLocalBox(context.Background(), localBoxOptions{Manifest: m, Key: key, Root: t.TempDir(),
		Addr: "127.0.0.1:0", PublicURL: "http://localhost:1", Getenv: func(string) string { return "" },
		Logger: testkit.Logger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	dir := t.TempDir()
	_, stderr, err := runGbx(t, nil, dir, "prompt", "--url", box.URL, "--key", key, "-o", "out", `seq 1 250000 > "$GLOVEBOX_OUTPUT/big.txt"`)
	if err != nil {
		t.Fatalf("prompt -o: %v\n%s", err, stderr)
	}
	if big := readFile(t, filepath.Join(dir, "out", "big.txt")); !strings.HasSuffix(big, "\n250000\n") || !strings.Contains(stderr, "server") {
		t.Errorf("saved big.txt: %d bytes; stderr:\n%s", len(big), stderr)
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
