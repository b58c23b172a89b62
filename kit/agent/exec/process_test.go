package exec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
)

// TestPromptProcessGroup checks that the shell leads a process group of its
// own, apart from the kit's.
func TestPromptProcessGroup(t *testing.T) {
	msg, err := run(t, testContext(t), newSession(t), &turn{text: "cat /proc/$$/stat"})
	if err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	// pid (comm) state ppid pgrp ...
	i := strings.LastIndexByte(msg, ')')
	f := strings.Fields(msg[i+1:])
	pid, _, _ := strings.Cut(msg, " ")
	if i < 0 || len(f) < 3 {
		t.Fatalf("/proc/$$/stat = %q, want pid (comm) state ppid pgrp ...", msg)
	}
	if f[2] != pid {
		t.Errorf("shell %s is in process group %s, want a group of its own", pid, f[2])
	}
	if own := strconv.Itoa(syscall.Getpgrp()); f[2] == own {
		t.Errorf("shell runs in the test's process group %s", own)
	}
}

// TestPromptAbort cancels prompts whose process groups hold background
// children, some of which ignore SIGTERM, and checks every process is gone.
func TestPromptAbort(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		grace time.Duration
	}{
		{"sleeping shell", `sleep 1000 & echo $!; wait`, time.Second},
		{"child ignores SIGTERM", `trap '' TERM; sleep 1000 & echo $!; wait`, 100 * time.Millisecond},
		{"grandchild with output redirected", `sh -c 'sleep 1000 >/dev/null 2>&1 & echo $!'; sleep 1000`, time.Second},
		{"no grace", `sleep 1000 & echo $!; wait`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(testContext(t))
			defer cancel()
			pids := make(chan int, 1)
			tr := &turn{text: tt.text, onEmit: func(e event) {
				if d, ok := e.Data.(exec.TextDelta); ok {
					if pid, err := strconv.Atoi(strings.TrimSpace(d.Text)); err == nil {
						pids <- pid
						cancel()
					}
				}
			}}
			_, err := run(t, ctx, newSession(t), tr, exec.WithGrace(tt.grace))
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Prompt() error = %v, want %v", err, context.Canceled)
			}
			select {
			case pid := <-pids:
				waitGone(t, pid)
			default:
				t.Fatal("the command never printed its child's pid")
			}
			for _, e := range tr.recorded() {
				if e.Type == exec.EventExit {
					t.Errorf("aborted prompt sent %v", e)
				}
			}
		})
	}
}

func TestPromptContextEnds(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	timedOut, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		text string
		want error
	}{
		{"cancelled before the start", cancelled, "echo never", context.Canceled},
		{"deadline while running", timedOut, "echo started; sleep 1000", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &turn{text: tt.text}
			msg, err := run(t, tt.ctx, newSession(t), tr, exec.WithGrace(0))
			if !errors.Is(err, tt.want) || msg != "" {
				t.Errorf("Prompt(%q) = %q, %v, want \"\", %v", tt.text, msg, err, tt.want)
			}
			for _, e := range tr.recorded() {
				if e.Type == exec.EventExit {
					t.Errorf("prompt whose context ended sent %v", e)
				}
			}
		})
	}
}

// TestPromptBackgroundStopped checks that a command that exits normally
// does not leave its background processes running.
func TestPromptBackgroundStopped(t *testing.T) {
	tests := []string{
		`sleep 1000 & echo $!`,
		`sleep 1000 >/dev/null 2>&1 & echo $!`,
		`(trap '' TERM; exec sleep 1000) >/dev/null & echo $!`,
	}
	for _, text := range tests {
		t.Run(text, func(t *testing.T) {
			tr := &turn{text: text}
			msg, err := run(t, testContext(t), newSession(t), tr, exec.WithGrace(100*time.Millisecond))
			if err != nil {
				t.Fatalf("Prompt(%q) error = %v", text, err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(msg))
			if err != nil {
				t.Fatalf("Prompt(%q) = %q, want a pid", text, msg)
			}
			waitGone(t, pid)
			if diff := cmp.Diff(exec.Exit{}, tr.exit(t)); diff != "" {
				t.Errorf("exit event (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPromptEscapedProcess checks that a process that left the group but
// still holds stdout cannot hold the prompt open forever.
func TestPromptEscapedProcess(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	tr := &turn{text: `setsid sleep 1000 & echo $!`}
	msg, err := run(t, testContext(t), newSession(t), tr, exec.WithGrace(0))
	if err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(msg))
	if err != nil {
		t.Fatalf("Prompt() = %q, want a pid", msg)
	}
	// The escaped process is outside the group's reach: clean it up here.
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(t, pid)
}

// killAtEnd kills, once the test has ended, the escaped process whose pid
// the prompt wrote to pidFile, and waits for it to be gone.
func killAtEnd(t *testing.T, pidFile string) {
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
				waitGone(t, pid)
			}
		}
	})
}

// waitGone waits until pid no longer runs (a zombie awaiting its reaper
// counts as gone) and fails the test if it still runs after a long while.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	err := testkit.Poll(context.Background(), func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state follows the parenthesised command name.
		i := bytes.LastIndexByte(stat, ')')
		return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
	})
	if err == nil {
		return
	}
	t.Errorf("process %d still runs after the prompt ended: %v", pid, err)
	syscall.Kill(pid, syscall.SIGKILL)
}

// TestPromptOutputHeldWhenCut checks that output written before the shell
// exits, by a process that escaped the group and holds the pipe open, is
// delivered whole even when the reader is held up past the time the pipes
// are cut: the first event blocks until well after it.
func TestPromptOutputHeldWhenCut(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	const size = 50000 // under a pipe's 64 KiB: the writer never blocks
	s := newSession(t)
	done := filepath.Join(s.Dirs.Work, "written")
	pidFile := filepath.Join(s.Dirs.Work, "pid")
	var once sync.Once
	tr := &turn{
		text: fmt.Sprintf(`setsid sh -c 'echo $$ > %s; head -c %d /dev/zero | tr "\0" b; touch %s; exec sleep 1000' & until [ -e %s ]; do sleep 0.01; done`, pidFile, size, done, done),
		onEmit: func(e event) {
			if e.Type != exec.EventTextDelta {
				return
			}
			once.Do(func() {
				waitFile(t, done)
				time.Sleep(exec.MinDrain + time.Second) // past the cut
			})
		},
	}
	killAtEnd(t, pidFile)
	if _, err := run(t, testContext(t), s, tr, exec.WithGrace(0)); err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	if got := tr.output(exec.Stdout); got != strings.Repeat("b", size) {
		t.Errorf("stdout holds %d bytes (%d of them b), want %d b", len(got), strings.Count(got, "b"), size)
	}
}

// TestPromptEndlessEscapedWriter checks that a process that escaped the
// group and writes without end cannot keep the prompt open: what the pipe
// holds at the cut is read, nothing after it.
func TestPromptEndlessEscapedWriter(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	s := newSession(t)
	pidFile := filepath.Join(s.Dirs.Work, "pid")
	tr := &turn{text: fmt.Sprintf(`setsid sh -c 'echo $$ > %s; exec yes' & until [ -s %s ]; do :; done`, pidFile, pidFile)}
	killAtEnd(t, pidFile)
	if _, err := run(t, testContext(t), s, tr, exec.WithGrace(0)); err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	if got := tr.output(exec.Stdout); !strings.HasPrefix(got, "y\ny\n") {
		t.Errorf("stdout starts %q, want yes's output", got[:min(len(got), 20)])
	}
}

// TestPromptOutputUnderLoad runs many short prompts at once while other
// processes keep every core busy, and checks that each one delivers all
// of its output.
func TestPromptOutputUnderLoad(t *testing.T) {
	burn(t)
	const prompts = 200
	var wg sync.WaitGroup
	errs := make(chan string, prompts)
	for i := range prompts {
		wg.Go(func() {
			s := newSession(t)
			want := fmt.Sprintf("hi %d\n", i)
			tr := &turn{text: "echo hi " + strconv.Itoa(i), s: s}
			conv, _ := exec.New().Open(t.Context(), s)
			msg, err := conv.Prompt(testContext(t), tr)
			conv.Close()
			switch {
			case err != nil:
				errs <- fmt.Sprintf("prompt %d: %v", i, err)
			case msg != want || tr.output(exec.Stdout) != want:
				errs <- fmt.Sprintf("prompt %d: message %q, stdout %q, want %q", i, msg, tr.output(exec.Stdout), want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	checkNoLeaks(t)
}

// burn keeps every core busy with a shell loop until the test ends.
func burn(t *testing.T) {
	t.Helper()
	for range runtime.NumCPU() {
		cmd := osexec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a CPU burner: %v", err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	if err := testkit.Poll(context.Background(), func() bool { _, err := os.Stat(path); return err == nil }); err != nil {
		t.Errorf("%s was not written: %v", path, err)
	}
}

// TestPromptWaitsIdleForHeldOutput checks that a prompt whose shell has
// exited, while an escaped process still holds its output open, waits for
// the output without spinning: the CPU time the test process uses while
// the pipes are held (minDrain, a second) stays a small part of it. It
// counts CPU time, not wall time: a loaded machine can only make it lower.
func TestPromptWaitsIdleForHeldOutput(t *testing.T) {
	if _, err := os.Stat("/usr/bin/setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	// The shell exits once sleep leads a session of its own, out of the
	// process group's reach, holding stdout.
	tr := &turn{text: `setsid sleep 1000 & p=$!
until [ "$(cut -d' ' -f6 /proc/$p/stat)" = "$p" ]; do sleep 0.01; done; echo $p`}
	before := cpuTime(t)
	start := time.Now()
	msg, err := run(t, testContext(t), newSession(t), tr, exec.WithGrace(0))
	held := time.Since(start)
	used := cpuTime(t) - before
	if err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(msg)); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		waitGone(t, pid)
	}
	if held < exec.MinDrain {
		t.Fatalf("the prompt ended after %v, before its output could be cut (%v): the escaped process did not hold it", held, exec.MinDrain)
	}
	if used > exec.MinDrain/4 {
		t.Errorf("the process used %v of CPU time while the prompt waited %v for its output, want a small part of it (no busy loop)", used, held)
	}
}

// cpuTime is the user and system CPU time the test process has used.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
