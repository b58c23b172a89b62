package kit

import (
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestHostileInputNames sends input names that are traps for line-based
// tools and language models: each is refused with an InputError naming
// its rule, and nothing is written.
func TestHostileInputNames(t *testing.T) {
	b := newBox(t, exec.New())
	c := b.dial("/", b.auth())
	defer c.close()
	for i, tc := range []struct{ name, rule string }{
		{"a\nb.txt", "control character"},
		{"a\tb", "control character"},
		{"evil\u202etxt.exe", "bidirectional"},
		{"zero\u200bwidth", "invisible"},
		{" lead", "white space"},
		{"trail ", "white space"},
		{"-rf", `starts with "-"`},
		{".input-x", "reserves"},
		{"a\uff0fb", "looks like"},
		{"..", "not a file name"},
	} {
		id := "n" + strings.Repeat("x", i)
		promptWith(c, id, "ls -A \"$GLOVEBOX_INPUT\"", map[string]any{tc.name: inline("x")})
		m := last(c.finish(id))
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if errCode(m) != protocol.CodeInput || !strings.Contains(msg, tc.rule) {
			t.Errorf("input %q: %v, want an InputError naming %q", tc.name, m, tc.rule)
		}
	}
	// The box still takes a plain name.
	promptWith(c, "ok", `cat "$GLOVEBOX_INPUT/plain name.txt"`, map[string]any{"plain name.txt": inline("fine")})
	if m := last(c.finish("ok")); m["type"] != "complete" || !strings.Contains(m["message"].(string), "fine") {
		t.Errorf("plain input: %v", m)
	}
}

// TestErrorsShowSessionPaths makes prompts fail on paths: the error a
// client gets names them as the session knows them (work/..., input/...),
// never with the host's directories.
func TestErrorsShowSessionPaths(t *testing.T) {
	b := newBox(t, exec.New())
	c := b.dial("/", b.auth())
	defer c.close()

	// A tagged output that does not exist.
	c.prompt("tag", "/output missing.txt\ntrue")
	m := last(c.finish("tag"))
	msg, _ := m["error"].(map[string]any)["message"].(string)
	if errCode(m) != protocol.CodeOutput || !strings.Contains(msg, "work/missing.txt") {
		t.Errorf("missing tagged output: %v, want an OutputError naming work/missing.txt", m)
	}
	// An input whose place is taken by a directory the agent made.
	c.prompt("mk", `mkdir "$GLOVEBOX_INPUT/taken"`)
	if m := last(c.finish("mk")); m["type"] != "complete" {
		t.Fatalf("mkdir: %v", m)
	}
	promptWith(c, "in", "true", map[string]any{"taken": inline("x")})
	m = last(c.finish("in"))
	msg2, _ := m["error"].(map[string]any)["message"].(string)
	if errCode(m) != protocol.CodeInput || !strings.Contains(msg2, "input/taken") {
		t.Errorf("input over a directory: %v, want an InputError naming input/taken", m)
	}
	for _, s := range []string{msg, msg2} {
		if strings.Contains(s, b.root) || strings.Contains(s, "/tmp/") {
			t.Errorf("error message %q shows a host path (root %s)", s, b.root)
		}
	}
}
