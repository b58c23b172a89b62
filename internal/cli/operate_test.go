package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

func boxEnv(url, key string) map[string]string {
	return map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": key}
}

// TestPs shows a running prompt, then an idle session.
func TestPs(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	stdout, _, err := runGbx(t, env, t.TempDir(), "ps")
	if err != nil || stdout != "no sessions\n" {
		t.Errorf("ps on an idle box = %q, %v", stdout, err)
	}

	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	ctx, cancel := context.WithCancel(testkit.Context(t, "the sleeping prompt"))
	defer cancel()
	r, err := b.Prompt(ctx, "echo started; sleep 60", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e := range r.Events(ctx) {
		if e.Type == "text_delta" {
			break // it runs
		}
	}
	stdout, stderr, err := runGbx(t, env, t.TempDir(), "ps")
	if err != nil {
		t.Fatalf("ps: %v\n%s", err, stderr)
	}
	if alias, _, err := runGbx(t, env, t.TempDir(), "sessions"); err != nil || len(alias) == 0 || strings.Count(alias, "\n") != strings.Count(stdout, "\n") {
		t.Errorf("gbx sessions = %q, %v; want what gbx ps lists", alias, err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	row := regexp.MustCompile(`^[0-9a-f]{32}\s+key\s+running\s+` + regexp.QuoteMeta(r.ID()) + `\s+\S+\s+0\s+0\s+`)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SESSION") || !row.MatchString(lines[1]) {
		t.Errorf("ps while a prompt runs:\n%s", stdout)
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "ps", "--json")
	var l protocol.SessionList
	if err != nil || json.Unmarshal([]byte(stdout), &l) != nil || len(l.Sessions) != 1 || l.Sessions[0].Running == nil || l.Sessions[0].Running.ID != r.ID() {
		t.Errorf("ps --json = %q, %v", stdout, err)
	}
	cancel()
	r.Wait(context.Background())

	token := mintFor(t, key, protocol.ScopeConnect)
	if _, _, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": token}, t.TempDir(), "ps"); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("ps with a connect token = %v, want unauthorized", err)
	}
}

func mintFor(t *testing.T, key string, scopes ...string) string {
	t.Helper()
	stdout, stderr, err := runGbx(t, map[string]string{"GLOVEBOX_KEY": key}, t.TempDir(), "token", "--scope", strings.Join(scopes, ","))
	if err != nil {
		t.Fatalf("gbx token: %v\n%s", err, stderr)
	}
	return strings.TrimSpace(stdout)
}

// TestLogs reads a box's log lines, as text, as JSON and followed.
func TestLogs(t *testing.T) {
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	if _, stderr, err := runGbx(t, env, t.TempDir(), "prompt", "echo the secret words; exit 4"); exitCode(err) != 4 {
		t.Fatalf("prompt: %v\n%s", err, stderr)
	}
	stdout, _, err := runGbx(t, env, t.TempDir(), "logs")
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	promptLine := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} INFO  prompt session=[0-9a-f]{32} prompt=\S+ duration_ms=\d+ outcome=complete outputs=0 output_bytes=0 exit_code=4$`)
	if !promptLine.MatchString(stdout) || !strings.Contains(stdout, "INFO  session opened") || strings.Contains(stdout, "secret words") {
		t.Errorf("logs:\n%s", stdout)
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "logs", "--json", "--since", "1h")
	if err != nil {
		t.Fatalf("logs --json: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("logs --json line %q: %v", line, err)
		}
		if m["msg"] == "prompt" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("logs --json has %d prompt lines, want 1:\n%s", n, stdout)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "logs", "--since", "tuesday"); !errors.Is(err, ErrUsage) {
		t.Errorf("logs --since tuesday = %v, want a usage error", err)
	}
	if stdout, _, err := runGbx(t, env, t.TempDir(), "logs", "--since", "2099-01-01T00:00:00Z"); err != nil || stdout != "" {
		t.Errorf("logs --since the future = %q, %v; want nothing", stdout, err)
	}

	// --follow prints the lines of a prompt made after it started, until
	// its context ends.
	ctx, cancel := context.WithCancel(testkit.Context(t, "gbx logs --follow"))
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := execute(ctx, IO{Stdin: strings.NewReader(""), Stdout: pw, Stderr: io.Discard, Getenv: func(k string) string { return env[k] }, Dir: t.TempDir()},
			[]string{"logs", "--follow", "--since", "0s"})
		pw.Close()
		done <- err
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	if _, stderr, err := runGbx(t, env, t.TempDir(), "prompt", "--json", "true"); err != nil {
		t.Fatalf("prompt: %v\n%s", err, stderr)
	}
	for {
		line, ok := <-lines
		if !ok {
			t.Fatal("gbx logs --follow ended before the prompt's line")
		}
		if strings.Contains(line, "INFO  prompt ") && strings.Contains(line, "exit_code=0") {
			break
		}
	}
	cancel()
	if err := testkit.Recv(t, done, "gbx logs --follow to stop once its context ended"); err != nil {
		t.Errorf("gbx logs --follow after cancel = %v, want nil", err)
	}
	for range lines {
	}
	noClientGoroutines(t)
}

// TestFilesLsRm lists a parked output, deletes it, and fails on a second
// delete.
func TestFilesLsRm(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	if stdout, _, err := runGbx(t, env, t.TempDir(), "files", "ls"); err != nil || stdout != "no files\n" {
		t.Errorf("files ls on a new box = %q, %v", stdout, err)
	}
	if _, stderr, err := runGbx(t, env, t.TempDir(), "prompt", `seq 1 250000 > "$GLOVEBOX_OUTPUT/big.txt"`); err != nil {
		t.Fatalf("prompt: %v\n%s", err, stderr)
	}
	stdout, _, err := runGbx(t, env, t.TempDir(), "files", "ls")
	m := regexp.MustCompile(`(?m)^([0-9a-f-]{36})\s+1\.6 MB\s+in (59m\d+s|1h0m)\s+big\.txt$`).FindStringSubmatch(stdout)
	if err != nil || m == nil || !strings.HasPrefix(stdout, "ID") {
		t.Fatalf("files ls = %q, %v", stdout, err)
	}
	id := m[1]
	stdout, _, err = runGbx(t, env, t.TempDir(), "files", "ls", "--json")
	var l protocol.FileList
	if err != nil || json.Unmarshal([]byte(stdout), &l) != nil || len(l.Files) != 1 || l.Files[0].ID != id || l.Files[0].Size != 1638895 {
		t.Errorf("files ls --json = %q, %v", stdout, err)
	}
	dir := t.TempDir()
	if _, _, err := runGbx(t, env, dir, "files", "get", id, "-o", "big.txt"); err != nil {
		t.Fatalf("files get: %v", err)
	}
	if got := readFile(t, filepath.Join(dir, "big.txt")); !strings.HasSuffix(got, "\n250000\n") {
		t.Errorf("files get wrote %d bytes", len(got))
	}
	if _, stderr, err := runGbx(t, env, t.TempDir(), "files", "rm", id); err != nil || stderr != "removed "+id+"\n" {
		t.Errorf("files rm = %q, %v", stderr, err)
	}
	if stdout, _, err := runGbx(t, env, t.TempDir(), "files", "ls"); err != nil || stdout != "no files\n" {
		t.Errorf("files ls after rm = %q, %v", stdout, err)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "files", "rm", id); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("files rm of a removed file = %v, want a 404", err)
	}
	for _, args := range [][]string{{"files"}, {"files", "ls", "x"}, {"files", "rm"}, {"files", "cp", "x"}} {
		if _, _, err := runGbx(t, env, t.TempDir(), args...); !errors.Is(err, ErrUsage) {
			t.Errorf("gbx %v = %v, want a usage error", args, err)
		}
	}
}

// TestEndpointsCommand adds, lists, uses and removes named endpoints.
func TestEndpointsCommand(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"named"}`)
	cfg := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": cfg, "MEDIA_KEY": key}
	if stdout, _, err := runGbx(t, env, t.TempDir(), "endpoints", "ls"); err != nil || !strings.HasPrefix(stdout, "no endpoints in ") {
		t.Errorf("endpoints ls with no file = %q, %v", stdout, err)
	}
	if _, stderr, err := runGbx(t, env, t.TempDir(), "endpoints", "add", "media", url, "--key-env", "MEDIA_KEY"); err != nil {
		t.Fatalf("endpoints add: %v\n%s", err, stderr)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "endpoints", "add", "inline", "ws://127.0.0.1:1/", "--key", "k-in-file"); err != nil {
		t.Fatalf("endpoints add --key: %v", err)
	}
	path := filepath.Join(cfg, "glovebox", "endpoints.json")
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("endpoints file: %v, %v; want mode 0600", st, err)
	}
	stdout, _, err := runGbx(t, env, t.TempDir(), "endpoints", "ls")
	want := regexp.MustCompile(`^NAME +URL +KEY\ninline +ws://127\.0\.0\.1:1/ +in the file\nmedia +` + regexp.QuoteMeta(url) + ` +\$MEDIA_KEY\n$`)
	if err != nil || !want.MatchString(stdout) || strings.Contains(stdout, "k-in-file") {
		t.Errorf("endpoints ls = %q, %v; want %s", stdout, err, want)
	}
	// --box finds it.
	if stdout, _, err := runGbx(t, env, t.TempDir(), "env", "--box", "media"); err != nil || !strings.HasPrefix(stdout, "named ") {
		t.Errorf("env --box media = %q, %v", stdout, err)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "endpoints", "add", "media", url); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("adding media twice = %v, want a hint to --force", err)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "endpoints", "add", "media", "ws://elsewhere/", "--force"); err != nil {
		t.Errorf("endpoints add --force: %v", err)
	}
	for _, args := range [][]string{
		{"endpoints", "add", "bad name", url},
		{"endpoints", "add", "x", "ftp://host/"},
		{"endpoints", "add", "x", url, "--key", "a", "--key-env", "B"},
		{"endpoints", "add", "x", url, "--key-env", "1X"},
		{"endpoints", "add", "x"},
		{"endpoints"},
	} {
		if _, _, err := runGbx(t, env, t.TempDir(), args...); !errors.Is(err, ErrUsage) {
			t.Errorf("gbx %v = %v, want a usage error", args, err)
		}
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "endpoints", "rm", "media", "inline"); err != nil {
		t.Fatalf("endpoints rm: %v", err)
	}
	if _, _, err := runGbx(t, env, t.TempDir(), "endpoints", "rm", "media"); err == nil || !strings.Contains(err.Error(), "not in") {
		t.Errorf("removing media twice = %v", err)
	}
	var eps map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &eps); err != nil || len(eps) != 0 {
		t.Errorf("endpoints file after rm = %v, %v", eps, err)
	}
}

// TestPromptInputURL sends an input the box fetches, refused on loopback
// until the box's [inputs] switch allows it.
func TestPromptInputURL(t *testing.T) {
	t.Parallel()
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fetched by the box") }))
	defer src.Close()
	url, key := testBox(t, `{"name":"t"}`)
	_, _, err := runGbx(t, boxEnv(url, key), t.TempDir(), "prompt", "--input-url", "d.txt="+src.URL+"/d.txt", `cat "$GLOVEBOX_INPUT/d.txt"`)
	var be *client.Error
	if !errors.As(err, &be) || be.Code != protocol.CodeInput || !strings.Contains(be.Message, "allow_loopback_urls = true") {
		t.Errorf("--input-url on loopback = %v, want an InputError naming allow_loopback_urls", err)
	}
	url, key = testBox(t, `{"name":"t","inputs":{"allow_loopback_urls":true}}`)
	stdout, stderr, err := runGbx(t, boxEnv(url, key), t.TempDir(), "prompt", "--input-url", "d.txt="+src.URL+"/d.txt", `cat "$GLOVEBOX_INPUT/d.txt"`)
	if err != nil || stdout != "fetched by the box\n" {
		t.Errorf("--input-url with the switch = %q, %v\n%s", stdout, err, stderr)
	}
	for _, spec := range []string{"d.txt", "=http://x/", "d.txt=file:///etc/passwd", "d.txt=http://"} {
		if _, _, err := runGbx(t, boxEnv(url, key), t.TempDir(), "prompt", "--input-url", spec, "true"); !errors.Is(err, ErrUsage) {
			t.Errorf("--input-url %q = %v, want a usage error", spec, err)
		}
	}
}

// TestTopLevel: gbx with no arguments fails with the help; version is a
// listed command; generate ends with the next steps.
func TestTopLevel(t *testing.T) {
	t.Parallel()
	stdout, stderr, err := runGbx(t, nil, t.TempDir())
	if !errors.Is(err, ErrUsage) || stdout != "" || !strings.Contains(stderr, "Commands:") {
		t.Errorf("gbx = %v, stdout %q, stderr %q; want a usage error and the help on stderr", err, stdout, stderr)
	}
	for _, name := range []string{"version", "ps", "logs", "endpoints", "files"} {
		if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(stderr) {
			t.Errorf("the help does not list %s:\n%s", name, stderr)
		}
	}
	if stdout, _, err := runGbx(t, nil, t.TempDir(), "help"); err != nil || !strings.Contains(stdout, "Commands:") {
		t.Errorf("gbx help = %q, %v", stdout, err)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if stdout, _, err := runGbx(t, nil, t.TempDir(), args...); err != nil || !regexp.MustCompile(`^gbx \S.*\n$`).MatchString(stdout) {
			t.Errorf("gbx %v = %q, %v", args, stdout, err)
		}
	}
	dir := t.TempDir()
	if _, stderr, err := runGbx(t, nil, dir, "init", "box"); err != nil {
		t.Fatalf("init: %v\n%s", err, stderr)
	}
	stdout, _, err = runGbx(t, nil, filepath.Join(dir, "box"), "generate")
	if err != nil || !strings.Contains(stdout, "Next steps:\n  run it here:      gbx dev .\n  build the image:  gbx build .\n                    (or: cd dist && nix build .#image && ./result | docker load)") {
		t.Errorf("generate's output has no next steps: %v\n%s", err, stdout)
	}
}

// TestDevVerbose: gbx dev -v logs every session and prompt; without -v
// it does not.
func TestDevVerbose(t *testing.T) {
	t.Parallel()
	for _, verbose := range []bool{true, false} {
		t.Run(fmt.Sprint("verbose=", verbose), func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "glovebox.json"), []byte(`{"name":"vbox","agent":{"type":"exec"}}`), 0o644)
			args := []string{"dev", "--addr", "127.0.0.1:0"}
			if verbose {
				args = append(args, "-v")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb testkit.LogBuffer
			done := make(chan error, 1)
			go func() {
				done <- execute(ctx, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Dir: dir}, args)
			}()
			testkit.Until(t, "gbx dev's url", func() bool { return devURLRE.MatchString(out.String()) })
			m := devURLRE.FindStringSubmatch(out.String())
			if _, stderr, err := runGbx(t, boxEnv(m[1], m[2]), t.TempDir(), "prompt", "true"); err != nil {
				t.Fatalf("prompt: %v\n%s", err, stderr)
			}
			if verbose {
				testkit.Until(t, "the session's closed line", func() bool { return strings.Contains(errb.String(), `msg="session closed"`) })
			}
			cancel()
			testkit.Recv(t, done, "gbx dev to stop")
			logged := errb.String()
			has := strings.Contains(logged, `msg="session opened"`) && regexp.MustCompile(`msg=prompt session=\S+ prompt=\S+ duration_ms=\d+ outcome=complete`).MatchString(logged)
			if has != verbose {
				t.Errorf("gbx dev -v=%v: session and prompt lines logged = %v:\n%s", verbose, has, logged)
			}
		})
	}
}
