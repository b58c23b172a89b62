package kit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
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
