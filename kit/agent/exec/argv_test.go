package exec_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
)

// TestPromptNotOnCommandLine: while a prompt runs, no process's command
// line (/proc/PID/cmdline, readable by every process of the box) holds
// its text, and the commands it starts do not inherit the variable that
// carried it.
func TestPromptNotOnCommandLine(t *testing.T) {
	marker := "glovebox-secret-" + strings.Repeat("x", 8)
	s := newSession(t)
	// A sleep of its own length, so that the test ends exactly it.
	sleep := fmt.Sprintf("30.%06d", time.Now().UnixNano()%1000000)
	tr := &turn{text: "echo " + marker + " >/dev/null; env | grep -c " + exec.PromptVar + "; sleep " + sleep}
	seen := make(chan []int, 1)
	tr.onEmit = func(ev event) {
		if ev.Type == exec.EventTextDelta {
			select {
			case seen <- testkit.WithCmdline(marker):
			default:
			}
		}
	}
	ctx := testContext(t)
	done := make(chan error, 1)
	go func() {
		_, err := run(t, ctx, s, tr)
		done <- err
	}()
	pids := testkit.Recv(t, seen, "the prompt's first output")
	if len(pids) > 0 {
		for _, pid := range pids {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Errorf("process %d has the prompt's text on its command line: %q", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if got := tr.output(exec.Stdout); got != "0\n" {
		t.Errorf("commands see %s: env | grep -c printed %q, want 0", exec.PromptVar, got)
	}
	// The prompt's sleep is ended by the test's end.
	testkit.Until(t, "a sleep under the prompt", func() bool { return len(testkit.WithCmdline("sleep\x00"+sleep)) > 0 })
	for _, pid := range testkit.WithCmdline("sleep\x00" + sleep) {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the prompt did not end")
	}
}

// TestPromptAsShC: the text behaves as under sh -c TEXT: the same output,
// exit status, $0, stdin, set -e and multi-line semantics.
func TestPromptAsShC(t *testing.T) {
	for _, text := range []string{
		"echo $0",
		"echo \"$#\" \"$@\"",
		"set -e\nfalse\necho not reached",
		"set -e\nif false; then :; fi\necho reached\nfalse\necho not reached",
		"false || echo or\ntrue && exit 4\necho no",
		"x=1\nf() { echo f$x; return 3; }\nf\necho $?",
		"read line; echo \"[$?:$line]\"",
		"trap 'echo trapped $?' EXIT\nexit 5",
		"cat <<EOF\nhere $HOME\nEOF",
		"echo 'unbalanced",
		"exit 300",
		"case a in a) echo case;; esac; (exit 7)",
		"set -u; echo $nosuchvar; echo no",
		"unset GLOVEBOX_PROMPT; echo ${GLOVEBOX_PROMPT-unset}",
		"",
		"# only a comment",
	} {
		t.Run(strings.SplitN(text, "\n", 2)[0], func(t *testing.T) {
			s := newSession(t)
			cmd := osexec.Command(exec.DefaultShell, "-c", text)
			cmd.Env, cmd.Dir = s.Env, s.Dirs.Work
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			code := 0
			if err := cmd.Run(); err != nil {
				var ee *osexec.ExitError
				if !errors.As(err, &ee) {
					t.Fatal(err)
				}
				code = ee.ExitCode()
			}
			tr := &turn{text: text}
			if _, err := run(t, testContext(t), s, tr); err != nil {
				t.Fatalf("Prompt(%q) = %v", text, err)
			}
			if got := tr.output(exec.Stdout); got != out.String() {
				t.Errorf("stdout of %q = %q, sh -c gives %q", text, got, out.String())
			}
			if got := tr.exit(t).Code; got != code {
				t.Errorf("exit code of %q = %d, sh -c gives %d", text, got, code)
			}
			if (tr.output(exec.Stderr) == "") != (errb.Len() == 0) {
				t.Errorf("stderr of %q = %q, sh -c gives %q", text, tr.output(exec.Stderr), errb.String())
			}
		})
	}
}
