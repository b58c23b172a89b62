package exec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	testkit.NoGoroutines(t, "kit/agent/exec.readStream", "kit/agent/exec.(*run).stop")
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
