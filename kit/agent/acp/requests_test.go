package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent"
)

func TestPermission(t *testing.T) {
	tests := []struct {
		name    string
		answers []string // display_resolve values, in order; "reject" rejects
		want    string
		asks    int
	}{
		{"optionId string", []string{`"allow"`}, "selected allow", 1},
		{"optionId object", []string{`{"optionId":"deny"}`}, "selected deny", 1},
		{"v1 true", []string{`true`}, "selected allow", 1},
		{"v1 false", []string{`false`}, "selected deny", 1},
		{"unknown then valid", []string{`"bogus"`, `"always"`}, "selected always", 2},
		{"never valid", []string{`"a"`, `42`, `{"x":1}`}, "cancelled", 3},
		{"rejected", []string{"reject"}, "cancelled", 1},
	}
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tt := &testTurn{text: "permission", sess: s}
			tt.answer = func(n int, _ json.RawMessage) (json.RawMessage, error) {
				a := tc.answers[n-1]
				if a == "reject" {
					return nil, &agent.RejectedError{SlotID: "slot_1", Reason: json.RawMessage(`"no"`)}
				}
				return json.RawMessage(a), nil
			}
			msg, err := c.Prompt(testkit.Context(t, "the prompt's answer"), tt)
			tt.finish()
			if err != nil {
				t.Fatalf("Prompt = %v", err)
			}
			if msg != tc.want {
				t.Errorf("agent saw %q, want %q", msg, tc.want)
			}
			if len(tt.asks) != tc.asks {
				t.Fatalf("slot pushed %d times, want %d", len(tt.asks), tc.asks)
			}
			var in struct {
				Renderer  string          `json:"renderer"`
				ToolName  string          `json:"toolName"`
				ToolInput json.RawMessage `json:"toolInput"`
				ToolCall  json.RawMessage `json:"toolCall"`
				Options   []permissionOption
				Error     string `json:"error"`
			}
			if err := json.Unmarshal(tt.asks[0], &in); err != nil {
				t.Fatal(err)
			}
			if in.Renderer != "permission_request" || in.ToolName != "rm -rf /work/tmp" || len(in.Options) != 3 || in.Error != "" {
				t.Errorf("slot input = %s", tt.asks[0])
			}
			jsonEqual(t, "toolInput", in.ToolInput, `{"path":"/work/tmp"}`)
			if tc.asks > 1 {
				_ = json.Unmarshal(tt.asks[1], &in)
				if !strings.Contains(in.Error, `"allow", "always", "deny"`) {
					t.Errorf("re-pushed slot error = %q, want it to list the optionIds", in.Error)
				}
			}
			// The tool call's event reached the client before the slot.
			if got := tt.types(); len(got) == 0 || !slicesContains(got, "tool_use") {
				t.Errorf("events %v, want a tool_use", got)
			}
		})
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestPermissionCancelledByAbort(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	pid := c.pid()
	ctx, cancel := context.WithCancel(testkit.Context(t, "the prompt's answer"))
	asked := make(chan struct{})
	tt := &testTurn{text: "permission", sess: s}
	tt.answer = func(_ int, _ json.RawMessage) (json.RawMessage, error) {
		close(asked)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	go func() { <-asked; cancel() }()
	_, err := c.Prompt(ctx, tt)
	tt.finish()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Prompt = %v, want context.Canceled", err)
	}
	// The agent answered session/cancel in time: same process, still usable.
	_, msg := mustPrompt(t, c, s, "echo still here")
	if msg != "still here" || c.pid() != pid {
		t.Errorf("after abort: message %q on pid %d, want \"still here\" on pid %d", msg, c.pid(), pid)
	}
}

func TestFS(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	work := s.Dirs.Work
	if err := os.Symlink("/etc/hostname", filepath.Join(work, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "lines.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "lines.txt"), filepath.Join(work, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(s.Dirs.Output, "o.txt"), filepath.Join(work, "to-output")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big.txt"), bytes.Repeat([]byte("0123456789abcde\n"), 9<<16), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(work, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prompt string
		want   string // the agent's reply, or its prefix when it ends in "…"
	}{
		{"read " + work + "/big.txt", "error -32602: " + work + "/big.txt: more than 8388608 bytes; read it in parts with line and limit"},
		{"read " + work + "/big.txt 589824 1", "0123456789abcde\n"},
		{"read " + work + "/fifo", "error -32602: " + work + "/fifo is not a regular file"},
		{"write " + work + "/fifo x", "error -32602: " + work + "/fifo is not a regular file"},
		{"write " + work + "/sub/dir/a.txt hello there", "written"},
		{"read " + work + "/sub/dir/a.txt", "hello there"},
		{"read " + work + "/lines.txt 2 2", "two\nthree\n"},
		{"read " + work + "/lines.txt 3", "three\nfour\n"},
		{"read " + work + "/abs-link 1 1", "one\n"},
		{"write " + work + "/to-output via link", "written"},
		{"read " + s.Dirs.Output + "/o.txt", "via link"},
		{"read /etc/passwd", "error -32602: path \"/etc/passwd\" is outside the session's directories…"},
		{"read " + work + "/../../../etc/passwd", "error -32602: path…"},
		{"read " + work + "/escape", "error -32602: path…"},
		{"write " + work + "/escape x", "error -32602: path…"},
		{"read relative.txt", "error -32602: path \"relative.txt\" is not absolute…"},
		{"read " + work + "/missing.txt", "error -32002: …"},
		{"read " + work, "error -32602: …"},
		{"write " + s.Dirs.Input + "/x.txt nope", "error -32602: the input directory…"},
	}
	for _, tc := range tests {
		_, msg := mustPrompt(t, c, s, tc.prompt)
		if p, ok := strings.CutSuffix(tc.want, "…"); ok {
			if !strings.HasPrefix(msg, p) {
				t.Errorf("%s: agent got %q, want a reply starting %q", tc.prompt, msg, p)
			}
		} else if msg != tc.want {
			t.Errorf("%s: agent got %q, want %q", tc.prompt, msg, tc.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(work, "sub", "dir", "a.txt")); err != nil || string(b) != "hello there" {
		t.Errorf("written file = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dirs.Input, "x.txt")); err == nil {
		t.Errorf("a write into the read-only input directory went through")
	}
}

func TestTerminal(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	type result struct {
		Exit      exitStatusJSON
		Output    string
		Truncated bool
	}
	run := func(cmd string) result {
		t.Helper()
		_, msg := mustPrompt(t, c, s, cmd)
		var r result
		if err := json.Unmarshal([]byte(msg), &r); err != nil {
			t.Fatalf("%s: agent said %q", cmd, msg)
		}
		return r
	}
	r := run("term echo hi")
	if r.Exit.ExitCode == nil || *r.Exit.ExitCode != 0 || r.Output != "hi\n" || r.Truncated {
		t.Errorf("term echo hi = %+v", r)
	}
	r = run("term false")
	if r.Exit.ExitCode == nil || *r.Exit.ExitCode != 1 {
		t.Errorf("term false = %+v, want exit code 1", r)
	}
	r = run("term pwd")
	if work, _ := filepath.EvalSymlinks(s.Dirs.Work); r.Output != work+"\n" {
		t.Errorf("term pwd = %q, want the work directory", r.Output)
	}
	// outputByteLimit is 64: the tail is kept.
	r = run("term seq 1 100")
	if !r.Truncated || len(r.Output) > 64 || !strings.HasSuffix(r.Output, "99\n100\n") {
		t.Errorf("term seq 1 100 = %+v, want the last 64 bytes, truncated", r)
	}
	if _, msg := mustPrompt(t, c, s, "shell echo abc | tr a-c x-z"); msg != "xyz\n" {
		t.Errorf("a shell line as the command: agent got %q, want %q", msg, "xyz\n")
	}
	_, msg := mustPrompt(t, c, s, "termkill")
	if msg != `{"exit":{"exitCode":null,"signal":"SIGKILL"}}` {
		t.Errorf("termkill: agent got %s", msg)
	}
	_, msg = mustPrompt(t, c, s, "term /no/such/program")
	if !strings.HasPrefix(msg, "error -32603: start /no/such/program") {
		t.Errorf("term /no/such/program: agent got %s", msg)
	}
	// A terminal left running is killed on Close (checked by open's cleanup).
	_, msg = mustPrompt(t, c, s, "termleak")
	if !strings.HasPrefix(msg, "term_") {
		t.Errorf("termleak: agent got %s", msg)
	}
}

func TestTerminalCwd(t *testing.T) {
	c, s, _ := open(t, sdkAgentSpec(t), nil)
	out, _ := filepath.EvalSymlinks(s.Dirs.Output)
	tests := []struct{ cwd, want string }{
		{s.Dirs.Output, out + "\n"},
		{"/etc", "error -32602: path \"/etc\" is outside the session's directories"},
		{s.Dirs.Work + "/../..", "error -32602: path"},
		{"relative", "error -32602: path \"relative\" is not absolute"},
		{s.Dirs.Work + "/missing", "error -32002: "},
	}
	for _, tc := range tests {
		if _, msg := mustPrompt(t, c, s, "termcwd "+tc.cwd); !strings.HasPrefix(msg, tc.want) {
			t.Errorf("terminal with cwd %s: agent got %q, want %q...", tc.cwd, msg, tc.want)
		}
	}
}
