package kit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestExecAgent runs prompts through the exec agent: real /bin/sh
// processes in the session's directories.
func TestExecAgent(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)))
	c := b.dial("/", nil)
	promptWith(c, "1", `cat "$GLOVEBOX_INPUT/in.txt"; echo done > "$GLOVEBOX_OUTPUT/out.txt"; pwd`, map[string]any{"in.txt": inline("from input\n")})
	fs := c.finish("1")
	m := last(fs)
	sid := c.hello["session_id"].(string)
	if m["type"] != "complete" || !strings.Contains(m["message"].(string), "from input") || !strings.Contains(m["message"].(string), filepath.Join("work", sid)) {
		t.Fatalf("exec prompt: %v", fs)
	}
	if outs := outputsOf(t, m); outs["out.txt"]["kind"] != "inline" {
		t.Errorf("outputs = %v", outs)
	}
	var sawExit bool
	for _, e := range ofType(fs, "event") {
		sawExit = sawExit || e["event_type"] == "exit"
	}
	if !sawExit {
		t.Errorf("no exit event in %v", fs)
	}

	// Abort kills the process; the session goes on.
	c.prompt("2", "echo running; sleep 30")
	c.until(func(m map[string]any) bool { return m["id"] == "2" && m["type"] == "event" }) // it runs
	c.send(map[string]any{"type": "abort", "id": "2"})
	if m := last(c.finish("2")); errCode(m) != "AbortError" {
		t.Errorf("abort: %v", m)
	}

	// /output of a file the command writes in the work dir.
	c.prompt("3", "/output made.txt\necho hi > made.txt")
	if outs := outputsOf(t, last(c.finish("3"))); outs["made.txt"] == nil {
		t.Errorf("outputs = %v", outs)
	}

	// The session's directories go with it.
	c.close()
	waitFor(t, "session end", func() bool { return b.srv.sessionCount() == 0 })
	for _, d := range []string{"work", "input", "output"} {
		if _, err := os.Stat(filepath.Join(b.root, d, sid)); !os.IsNotExist(err) {
			t.Errorf("%s dir of the session still there: %v", d, err)
		}
	}
}

// TestExecPromptNotInCmdline: while one session's prompt runs, another
// session's prompt reads every process's command line in the box and
// does not find the first one's text. (With a pid namespace per session
// the second would not see the first's processes at all: the layer is
// off here, as on a platform without it.)
func TestExecPromptNotInCmdline(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) {
		m.Sandbox = &protocol.SandboxSpec{PID: new(false), Mount: new(false)}
	})
	// Without a mount namespace the sessions' uids reach their directories
	// through the test's own.
	for d := b.root; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	a := b.dial("/", nil)
	a.prompt("a", "echo started; : glovebox-private-words; sleep 30")
	if m := a.next(); m["type"] != "event" {
		t.Fatalf("first frame of the prompt = %v, want an event", m)
	}

	spy := b.dial("/", nil)
	// The spy's own text must not hold the words it looks for.
	spy.prompt("s", `m=glovebox-private; m="$m-words"; n=0; found=0
for f in /proc/[0-9]*/cmdline; do
  c=$(tr '\0' ' ' < "$f" 2>/dev/null) || continue
  n=$((n+1))
  case $c in *"$m"*) found=$((found+1)); echo "FOUND $f: $c";; esac
done
echo "scanned $n found $found"`)
	m := last(spy.finish("s"))
	msg, _ := m["message"].(string)
	if m["type"] != "complete" || !strings.Contains(msg, "scanned ") {
		t.Fatalf("spy prompt = %v", m)
	}
	if !strings.Contains(msg, "found 0") {
		t.Errorf("another session read the prompt's text from a command line:\n%s", msg)
	}
	if strings.Contains(msg, "scanned 0 ") || strings.Contains(msg, "scanned 1 ") {
		// Other layers hide the processes: nothing to prove here (the
		// exec agent's own test reads every command line from outside).
		t.Skipf("the spy sees (almost) no process's command line: %s", msg)
	}
	a.send(map[string]any{"type": "abort", "id": "a"})
	a.finish("a")
}
