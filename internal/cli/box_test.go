package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"

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
