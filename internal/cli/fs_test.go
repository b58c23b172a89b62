package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// TestFS: gbx fs puts, lists, stats, gets (a part too), moves and removes
// a live session's files, and says what is wrong with a bad path.
func TestFS(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	ctx := testkit.Context(t, "a prompt")
	r, err := b.Prompt(ctx, "mkdir d", client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s := b.SessionID()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "in.txt"), []byte("hello, world"), 0o644)
	gbx := func(args ...string) (string, string, error) {
		t.Helper()
		return runGbx(t, env, dir, append([]string{"fs", args[0], "--session", s}, args[1:]...)...)
	}
	if _, stderr, err := gbx("put", "in.txt", "work/d/a.txt"); err != nil || !strings.Contains(stderr, "work/d/a.txt (12B)") {
		t.Fatalf("fs put = %v, %q", err, stderr)
	}
	if out, _, err := gbx("ls", "work/d"); err != nil || !strings.Contains(out, "a.txt") || !strings.Contains(out, "-rw") {
		t.Errorf("fs ls = %v, %q", err, out)
	}
	if out, _, err := gbx("ls"); err != nil || !strings.Contains(out, "work/") || !strings.Contains(out, "output/") {
		t.Errorf("fs ls (the roots) = %v, %q", err, out)
	}
	if out, _, err := gbx("stat", "work/d/a.txt", "--json"); err != nil || !strings.Contains(out, `"size": 12`) {
		t.Errorf("fs stat --json = %v, %q", err, out)
	}
	if out, _, err := gbx("get", "work/d/a.txt", "-", "--offset", "7", "--length", "5"); err != nil || out != "world" {
		t.Errorf("fs get - --offset 7 --length 5 = %v, %q", err, out)
	}
	if _, _, err := gbx("get", "work/d/a.txt"); err != nil {
		t.Errorf("fs get = %v", err)
	} else if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "hello, world" {
		t.Errorf("fs get wrote %q", got)
	}
	if _, _, err := gbx("mv", "work/d/a.txt", "output/b.txt"); err != nil {
		t.Errorf("fs mv = %v", err)
	}
	if _, _, err := gbx("rm", "work/d"); err != nil {
		t.Errorf("fs rm of an empty directory = %v", err)
	}
	if _, _, err := gbx("mkdir", "-p", "work/x/y"); err != nil {
		t.Errorf("fs mkdir -p = %v", err)
	}
	if _, _, err := gbx("rm", "work/x"); err == nil || !strings.Contains(err.Error(), "recursive") {
		t.Errorf("fs rm of a directory that is not empty = %v, want it to name --recursive", err)
	}
	if _, _, err := gbx("rm", "-r", "work/x"); err != nil {
		t.Errorf("fs rm -r = %v", err)
	}
	if _, _, err := gbx("get", "work/../etc/passwd", "-"); err == nil || !strings.Contains(err.Error(), `".." name`) {
		t.Errorf("fs get work/../etc/passwd = %v, want the path refused", err)
	}
	// fs watch prints the agent's changes until interrupted.
	ctx, cancel := context.WithCancel(testkit.Context(t, "gbx fs watch"))
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }, Dir: dir},
			[]string{"fs", "watch", "--session", s, "work"})
	}()
	testkit.Until(t, "fs watch to start", func() bool { return strings.Contains(errb.String(), "watching work") })
	if r, err := b.Prompt(ctx, "echo x > w.txt; mv w.txt v.txt; rm v.txt", client.PromptOptions{}); err != nil {
		t.Fatal(err)
	} else if _, err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, "fs watch to print the remove", func() bool { return strings.Contains(out.String(), "remove work/v.txt") })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("fs watch ended with %v", err)
	}
	if want := "create work/w.txt\nwrite work/w.txt\nrename work/w.txt -> work/v.txt\nremove work/v.txt\n"; out.String() != want {
		t.Errorf("fs watch printed %q, want %q", out.String(), want)
	}

	if _, _, err := runGbx(t, env, dir, "fs", "ls", "work"); err == nil || !strings.Contains(err.Error(), "--session") {
		t.Errorf("fs ls without --session = %v", err)
	}
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
