package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// gbx shell without a terminal on stdin: the command's output, its exit
// status as gbx's; gbx proc starts, lists, reads and stops a process of
// the same session.
func TestShellAndProc(t *testing.T) {
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	stdout, stderr, err := runGbx(t, env, t.TempDir(), "shell", "--", "/bin/sh", "-c", "echo in-the-box; exit 6")
	if exitCode(err) != 6 || !strings.Contains(stdout, "in-the-box") {
		t.Errorf("gbx shell = %q %q, %v; want in-the-box and status 6", stdout, stderr, err)
	}

	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	sid, err := b.Connect(testkit.Context(t, "a session"))
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = runGbx(t, env, t.TempDir(), "proc", "start", "--session", sid, "--env", "WHO=proc", "--", "/bin/sh", "-c", "echo hi-$WHO; echo oops >&2; exec sleep 1000")
	if err != nil || strings.TrimSpace(stdout) != "p1" {
		t.Fatalf("gbx proc start = %q %q, %v; want p1", stdout, stderr, err)
	}
	testkit.Until(t, "the process's output", func() bool {
		out, _, _ := runGbx(t, env, t.TempDir(), "proc", "logs", "--session", sid, "p1")
		return out == "hi-proc\n"
	})
	stdout, _, err = runGbx(t, env, t.TempDir(), "proc", "logs", "--session", sid, "--stderr", "p1")
	if err != nil || stdout != "oops\n" {
		t.Errorf("gbx proc logs --stderr = %q, %v", stdout, err)
	}
	stdout, _, err = runGbx(t, env, t.TempDir(), "proc", "ls", "--session", sid)
	if err != nil || !strings.Contains(stdout, "p1") || !strings.Contains(stdout, "running") || !strings.Contains(stdout, "exec sleep 1000") {
		t.Errorf("gbx proc ls = %q, %v", stdout, err)
	}
	if _, stderr, err = runGbx(t, env, t.TempDir(), "proc", "kill", "--session", sid, "--signal", "SIGTERM", "p1"); err != nil {
		t.Fatalf("gbx proc kill --signal = %v %s", err, stderr)
	}
	var out, errb bytes.Buffer
	err = execute(testkit.Context(t, "gbx proc logs -f"), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }, Dir: t.TempDir()}, []string{"proc", "logs", "-f", "--session", sid, "p1"})
	if err != nil || out.String() != "hi-proc\n" || !strings.Contains(errb.String(), "killed by SIGTERM") {
		t.Errorf("gbx proc logs -f = %q %q, %v; want the output and its end by SIGTERM", out.String(), errb.String(), err)
	}
	if _, stderr, err = runGbx(t, env, t.TempDir(), "proc", "kill", "--session", sid, "p1"); err != nil {
		t.Fatalf("gbx proc kill = %v %s", err, stderr)
	}
	if stdout, _, _ = runGbx(t, env, t.TempDir(), "proc", "ls", "--session", sid); stdout != "no processes\n" {
		t.Errorf("gbx proc ls after kill = %q", stdout)
	}
	if _, _, err = runGbx(t, env, t.TempDir(), "proc", "ls"); exitCode(err) != 1 || !strings.Contains(err.Error(), "--session") {
		t.Errorf("gbx proc ls without --session = %v, want a usage error naming --session", err)
	}
}
