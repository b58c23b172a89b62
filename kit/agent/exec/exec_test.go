package exec_test

import (
	"bytes"
	"context"
	"encoding/json"
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
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// TestMain fails the run if a shell the tests started is still a child of
// the test process, or a goroutine still runs, once every test is over.
func TestMain(m *testing.M) {
	sandbox.MaybeSupervise() // the test binary serves as its sessions' supervisor
	testkit.Main(m)
}

// event is one Emit call as the test turn recorded it.
type event struct {
	Type string
	Data any
}

// turn is an agent.Turn for one prompt. Emit records every event and calls
// onEmit, if set, outside the lock.
type turn struct {
	text   string
	skills []agent.SkillResult
	s      *agent.Session
	onEmit func(event)
	fail   error // returned by Emit when set

	mu     sync.Mutex
	events []event
}

func (t *turn) ID() string                       { return "p1" }
func (t *turn) Text() string                     { return t.text }
func (t *turn) Inputs() []agent.Input            { return nil }
func (t *turn) Skills() []agent.SkillResult      { return t.skills }
func (t *turn) Session() *agent.Session          { return t.s }
func (t *turn) TagOutput(string) error           { return nil }
func (t *turn) Clear(string) error               { return nil }
func (t *turn) Show(string, any) (string, error) { return "", errors.New("no display") }
func (t *turn) Ask(context.Context, string, any) (json.RawMessage, error) {
	return nil, errors.New("no display")
}

func (t *turn) Emit(typ string, data any) error {
	if t.fail != nil {
		return t.fail
	}
	e := event{Type: typ, Data: data}
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
	if t.onEmit != nil {
		t.onEmit(e)
	}
	return nil
}

func (t *turn) recorded() []event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]event(nil), t.events...)
}

// output concatenates the text of the stream's text_delta events.
func (t *turn) output(stream string) string {
	var b strings.Builder
	for _, e := range t.recorded() {
		if d, ok := e.Data.(exec.TextDelta); ok && e.Type == exec.EventTextDelta && d.Stream == stream {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// exit returns the data of the exit event, which must be the last event.
func (t *turn) exit(tb testing.TB) exec.Exit {
	tb.Helper()
	ev := t.recorded()
	if len(ev) == 0 {
		tb.Fatal("no events, want an exit event last")
	}
	last := ev[len(ev)-1]
	ex, ok := last.Data.(exec.Exit)
	if last.Type != exec.EventExit || !ok {
		tb.Fatalf("last event = %s %#v, want exit", last.Type, last.Data)
	}
	return ex
}

// newSession makes a session with its own directories under t.TempDir().
func newSession(t *testing.T) *agent.Session {
	t.Helper()
	root := t.TempDir()
	d := agent.Dirs{
		Work:   filepath.Join(root, "work"),
		Input:  filepath.Join(root, "input"),
		Output: filepath.Join(root, "output"),
	}
	for _, p := range []string{d.Work, d.Input, d.Output} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &agent.Session{
		ID:   "s1",
		Dirs: d,
		Env: []string{
			"PATH=" + os.Getenv("PATH"),
			"GLOVEBOX_WORK=" + d.Work,
			"GLOVEBOX_INPUT=" + d.Input,
			"GLOVEBOX_OUTPUT=" + d.Output,
			"GLOVEBOX_SESSION=s1",
		},
	}
}

// run runs text as one prompt on a new conversation and checks that the
// prompt leaves no goroutine behind.
func run(t *testing.T, ctx context.Context, s *agent.Session, tr *turn, opts ...exec.Option) (string, error) {
	t.Helper()
	if tr.s == nil {
		tr.s = s
	}
	conv, err := exec.New(opts...).Open(ctx, s)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	msg, err := conv.Prompt(ctx, tr)
	if cerr := conv.Close(); cerr != nil {
		t.Errorf("Close() = %v", cerr)
	}
	checkNoLeaks(t)
	return msg, err
}

// checkNoLeaks fails the test if a goroutine of package exec outlives the
// prompt that started it.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	testkit.NoGoroutines(t, "kit/agent/exec.readStream", "kit/agent/exec.(*conversation).Prompt.func")
}

// testContext is the context of a test prompt: a deadlock fails the test
// instead of hanging it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestPrompt(t *testing.T) {
	tests := []struct {
		name       string
		text       string
		wantStdout string
		wantStderr string
		wantExit   exec.Exit
		wantMsg    string
	}{
		{"echo", "echo hello", "hello\n", "", exec.Exit{Code: 0}, "hello\n"},
		{"stdout in order", "printf one; printf ' two'; printf ' three\\n'", "one two three\n", "", exec.Exit{}, "one two three\n"},
		{"stderr", "echo oops >&2", "", "oops\n", exec.Exit{}, ""},
		{"both streams", "echo out; echo err >&2; echo out2", "out\nout2\n", "err\n", exec.Exit{}, "out\nout2\n"},
		{"exit code", "echo partial; exit 3", "partial\n", "", exec.Exit{Code: 3}, "partial\n"},
		{"command not found", "no-such-command-glovebox", "", "", exec.Exit{Code: 127}, ""},
		{"killed by a signal", "kill -KILL $$", "", "", exec.Exit{Code: 137, Signal: "SIGKILL"}, ""},
		{"terminated", "kill -TERM $$", "", "", exec.Exit{Code: 143, Signal: "SIGTERM"}, ""},
		{"empty command", "", "", "", exec.Exit{}, ""},
		{"stdin is /dev/null", "cat; echo done", "done\n", "", exec.Exit{}, "done\n"},
		{"shell syntax", "for i in 1 2 3; do printf $i; done | tr 123 abc", "abc", "", exec.Exit{}, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &turn{text: tt.text}
			msg, err := run(t, testContext(t), newSession(t), tr)
			if err != nil {
				t.Fatalf("Prompt(%q) error = %v", tt.text, err)
			}
			if msg != tt.wantMsg {
				t.Errorf("Prompt(%q) = %q, want %q", tt.text, msg, tt.wantMsg)
			}
			if got := tr.output(exec.Stdout); got != tt.wantStdout {
				t.Errorf("stdout events of %q = %q, want %q", tt.text, got, tt.wantStdout)
			}
			got := tr.output(exec.Stderr)
			if tt.name == "command not found" {
				if !strings.Contains(got, "no-such-command-glovebox") {
					t.Errorf("stderr events of %q = %q, want the missing command named", tt.text, got)
				}
			} else if got != tt.wantStderr {
				t.Errorf("stderr events of %q = %q, want %q", tt.text, got, tt.wantStderr)
			}
			if diff := cmp.Diff(tt.wantExit, tr.exit(t)); diff != "" {
				t.Errorf("exit event of %q (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestPromptEnvAndDir(t *testing.T) {
	s := newSession(t)
	s.Env = append(s.Env, "BOX_GREETING=hi there")
	tests := []struct {
		text string
		want string
	}{
		{"pwd -P", mustEval(t, s.Dirs.Work) + "\n"},
		{`printf %s "$GLOVEBOX_WORK"`, s.Dirs.Work},
		{`printf %s "$GLOVEBOX_INPUT"`, s.Dirs.Input},
		{`printf %s "$GLOVEBOX_OUTPUT"`, s.Dirs.Output},
		{`printf %s "$BOX_GREETING"`, "hi there"},
		{`printf %s "${HOME-unset}"`, "unset"}, // the kit's environment is not inherited
		{`echo made > "$GLOVEBOX_OUTPUT/a.txt" && cat "$GLOVEBOX_OUTPUT/a.txt"`, "made\n"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := run(t, testContext(t), s, &turn{text: tt.text})
			if err != nil || got != tt.want {
				t.Errorf("Prompt(%q) = %q, %v, want %q, nil", tt.text, got, err, tt.want)
			}
		})
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPromptStreams checks that output reaches the client while the
// command runs: the command waits for a file that the test creates only
// when the first event arrives.
func TestPromptStreams(t *testing.T) {
	s := newSession(t)
	gate := filepath.Join(s.Dirs.Work, "gate")
	var once sync.Once
	tr := &turn{
		text: `echo waiting; while [ ! -e gate ]; do sleep 0.01; done; echo released`,
		onEmit: func(e event) {
			if d, ok := e.Data.(exec.TextDelta); ok && strings.Contains(d.Text, "waiting") {
				once.Do(func() { os.WriteFile(gate, nil, 0o644) })
			}
		},
	}
	msg, err := run(t, testContext(t), s, tr)
	if err != nil {
		t.Fatalf("Prompt() error = %v (the first line never streamed?)", err)
	}
	if want := "waiting\nreleased\n"; msg != want {
		t.Errorf("Prompt() = %q, want %q", msg, want)
	}
	want := []event{
		{exec.EventTextDelta, exec.TextDelta{Text: "waiting\n", Stream: exec.Stdout}},
		{exec.EventTextDelta, exec.TextDelta{Text: "released\n", Stream: exec.Stdout}},
		{exec.EventExit, exec.Exit{}},
	}
	if diff := cmp.Diff(want, tr.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

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

func TestPromptSkills(t *testing.T) {
	tr := &turn{
		text: "echo ran",
		skills: []agent.SkillResult{
			{Name: "environment", Content: "the box"},
			{Name: "workspace", Content: "empty"},
		},
	}
	if _, err := run(t, testContext(t), newSession(t), tr); err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	want := []event{
		{exec.EventSkill, exec.Skill{Name: "environment", Content: "the box"}},
		{exec.EventSkill, exec.Skill{Name: "workspace", Content: "empty"}},
		{exec.EventTextDelta, exec.TextDelta{Text: "ran\n", Stream: exec.Stdout}},
		{exec.EventExit, exec.Exit{}},
	}
	if diff := cmp.Diff(want, tr.recorded()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestEventJSON(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{exec.TextDelta{Text: "hi\n", Stream: exec.Stderr}, `{"text":"hi\n","stream":"stderr"}`},
		{exec.Exit{Code: 0}, `{"code":0}`},
		{exec.Exit{Code: 137, Signal: "SIGKILL"}, `{"code":137,"signal":"SIGKILL"}`},
		{exec.Skill{Name: "workspace", Content: "x"}, `{"name":"workspace","content":"x"}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("json.Marshal(%#v) = %s, %v, want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestPromptLargeOutput(t *testing.T) {
	const n = 500000 // about 3.4 MB of numbered lines
	var all strings.Builder
	for i := 1; i <= n; i++ {
		all.WriteString(strconv.Itoa(i))
		all.WriteByte('\n')
	}
	want := all.String()
	tr := &turn{text: fmt.Sprintf("seq 1 %d", n)}
	msg, err := run(t, testContext(t), newSession(t), tr)
	if err != nil {
		t.Fatalf("Prompt() error = %v", err)
	}
	if out := tr.output(exec.Stdout); out != want {
		t.Errorf("stdout events: %d bytes, want %d", len(out), len(want))
	}
	wantMsg := fmt.Sprintf("[stdout truncated: the last %d of %d bytes follow]\n", exec.DefaultMessageLimit, len(want)) +
		want[len(want)-exec.DefaultMessageLimit:]
	if msg != wantMsg {
		t.Errorf("Prompt() message: %d bytes starting %q, want the last MiB (%d bytes) after a note", len(msg), msg[:min(len(msg), 60)], len(wantMsg))
	}
}

func TestPromptMessageLimit(t *testing.T) {
	tests := []struct {
		text  string
		limit int
		want  string
	}{
		{"printf 0123456789", 4, "[stdout truncated: the last 4 of 10 bytes follow]\n6789"},
		{"printf 0123456789", 10, "0123456789"},
		{"printf 01234; printf 56789", 7, "[stdout truncated: the last 7 of 10 bytes follow]\n3456789"},
		// The kept tail starts on a rune boundary: "é" is two bytes.
		{"printf 'aéé'", 3, "[stdout truncated: the last 2 of 5 bytes follow]\né"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := run(t, testContext(t), newSession(t), &turn{text: tt.text}, exec.WithMessageLimit(tt.limit))
			if err != nil || got != tt.want {
				t.Errorf("Prompt(%q) with limit %d = %q, %v, want %q, nil", tt.text, tt.limit, got, err, tt.want)
			}
		})
	}
}

func TestPromptUTF8(t *testing.T) {
	s := newSession(t)
	// Multi-byte runes across many reads: every chunk must end on a rune
	// boundary.
	unit := "é€😀"
	const n = 40000
	src := filepath.Join(s.Dirs.Work, "runes.txt")
	if err := os.WriteFile(src, []byte(strings.Repeat(unit, n)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Invalid bytes pass through unchanged and do not stall the stream.
	invalid := "ok\xff\xfe\xc3(tail\xe2\x82"
	if err := os.WriteFile(filepath.Join(s.Dirs.Work, "invalid.bin"), []byte(invalid), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		text      string
		want      string
		wantValid bool
	}{
		{"runes", "cat runes.txt", strings.Repeat(unit, n), true},
		{"runes in odd pieces", "dd if=runes.txt bs=7 status=none", strings.Repeat(unit, n), true},
		{"invalid", "cat invalid.bin", invalid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &turn{text: tt.text}
			if _, err := run(t, testContext(t), s, tr); err != nil {
				t.Fatalf("Prompt(%q) error = %v", tt.text, err)
			}
			if got := tr.output(exec.Stdout); got != tt.want {
				t.Errorf("stdout events of %q: %d bytes, want %d", tt.text, len(got), len(tt.want))
			}
			for i, e := range tr.recorded() {
				d, ok := e.Data.(exec.TextDelta)
				if !ok {
					continue
				}
				if d.Text == "" {
					t.Errorf("event %d: empty text_delta", i)
				}
				if tt.wantValid && !utf8.ValidString(d.Text) {
					t.Errorf("event %d: chunk %q splits a rune", i, d.Text[max(0, len(d.Text)-4):])
				}
			}
		})
	}
}

func TestPromptStartError(t *testing.T) {
	tests := []struct {
		name string
		opts []exec.Option
		work string
	}{
		{"missing shell", []exec.Option{exec.WithShell("/nonexistent/sh")}, ""},
		{"missing work dir", nil, "/nonexistent/work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t)
			if tt.work != "" {
				s.Dirs.Work = tt.work
			}
			tr := &turn{text: "echo never"}
			_, err := run(t, testContext(t), s, tr, tt.opts...)
			if err == nil || !strings.HasPrefix(err.Error(), "exec: start ") || !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Prompt() error = %v, want exec: start ...: %v", err, os.ErrNotExist)
			}
			if ev := tr.recorded(); len(ev) != 0 {
				t.Errorf("events = %v, want none", ev)
			}
		})
	}
}

func TestPromptBadText(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string
	}{
		{"NUL byte", "echo a\x00b", "exec: the prompt text holds a NUL byte, which no shell command can"},
		// Linux caps one argument at 128 KiB.
		{"longer than an argument may be", "echo " + strings.Repeat("a", 256<<10), "argument list too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &turn{text: tt.text}
			_, err := run(t, testContext(t), newSession(t), tr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Prompt() error = %v, want one containing %q", err, tt.want)
			}
			if ev := tr.recorded(); len(ev) != 0 {
				t.Errorf("events = %v, want none", ev)
			}
		})
	}
}

func TestOpenNilSession(t *testing.T) {
	if _, err := exec.New().Open(t.Context(), nil); err == nil {
		t.Error("Open(nil) error = nil, want an error")
	}
}

func TestPromptEmitError(t *testing.T) {
	boom := errors.New("queue closed")
	tr := &turn{text: "echo hi; sleep 1000", fail: boom}
	_, err := run(t, testContext(t), newSession(t), tr, exec.WithGrace(0))
	if !errors.Is(err, boom) {
		t.Errorf("Prompt() error = %v, want %v", err, boom)
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
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
				waitGone(t, pid)
			}
		}
	})
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
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
				waitGone(t, pid)
			}
		}
	})
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
