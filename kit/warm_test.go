package kit

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// probeScript prints what a session's first command sees: its identity,
// its working directory, its environment, its directories and files, and
// its namespace's pid 1.
const probeScript = `id -u; id -g; id -G; pwd; env | sort
ls -ln "$GLOVEBOX_WORK" "$GLOVEBOX_INPUT" "$GLOVEBOX_OUTPUT" | grep -v '^total'
stat -c '%a %u %n' "$GLOVEBOX_WORK" "$GLOVEBOX_INPUT" "$GLOVEBOX_OUTPUT"
ls -A /tmp; tr '\0' ' ' </proc/1/cmdline; echo; grep -c . /proc/self/mountinfo`

// firstPrompt dials b, runs probeScript as the session's first prompt and
// returns its output with the box's root, the session's id and uid
// replaced by placeholders.
func firstPrompt(t *testing.T, b *box) string {
	t.Helper()
	c := b.dial("/", nil)
	defer c.close()
	c.prompt("1", probeScript)
	m := last(c.finish("1"))
	if m["type"] != "complete" {
		t.Fatalf("first prompt: %v", m)
	}
	out := m["message"].(string)
	sid := c.hello["session_id"].(string)
	uid := strings.SplitN(out, "\n", 2)[0]
	if n, err := strconv.Atoi(uid); err != nil || n == 0 && syscall.Geteuid() == 0 && b.srv.sb.Report().Has("users") {
		t.Fatalf("first line %q: want the session's own uid", uid)
	}
	out = strings.ReplaceAll(out, b.root, "<root>")
	out = strings.ReplaceAll(out, filepath.Base(filepath.Dir(b.root)), "<test>")
	out = strings.ReplaceAll(out, sid, "<session>")
	out = strings.ReplaceAll(out, uid, "<uid>")
	return out
}

// TestWarmFirstPromptIsACold one: a warm session's first prompt sees what a
// cold session's sees, to the byte (ids, uids and roots aside).
func TestWarmFirstPromptIsAColdOne(t *testing.T) {
	var w, c string
	// One box at a time: each checks at its end that nothing of the kit
	// outlives it.
	t.Run("warm", func(t *testing.T) {
		b := newBox(t, exec.New(), withWarm(1))
		waitFor(t, "a warm session", func() bool { return b.srv.WarmStats().Ready == 1 })
		w = firstPrompt(t, b)
		if st := b.srv.WarmStats(); st.Taken != 1 {
			t.Fatalf("WarmStats() = %+v after a connection, want Taken 1", st)
		}
	})
	t.Run("cold", func(t *testing.T) {
		b := newBox(t, exec.New())
		c = firstPrompt(t, b)
		if st := b.srv.WarmStats(); st != (WarmStats{}) {
			t.Errorf("a box with warm = 0 has pool counters %+v", st)
		}
	})
	if w == "" || c == "" {
		t.Fatal("a first prompt did not run")
	}
	if diff := cmp.Diff(c, w); diff != "" {
		t.Errorf("first prompt, cold vs warm (-cold +warm):\n%s", diff)
	}
}

// A warm session is used by one connection only; the pool refills.
func TestWarmSessionNeverReused(t *testing.T) {
	b := newBox(t, exec.New(), withWarm(1))
	seen := map[string]bool{}
	uids := map[string]bool{}
	for i := range 3 {
		waitFor(t, "the pool to refill", func() bool { return b.srv.WarmStats().Ready == 1 })
		c := b.dial("/", nil)
		c.prompt("1", `id -u; touch "$GLOVEBOX_WORK/mine"; ls "$GLOVEBOX_WORK" | wc -l`)
		m := last(c.finish("1"))
		sid := c.hello["session_id"].(string)
		if seen[sid] {
			t.Fatalf("connection %d got session %s again", i, sid)
		}
		seen[sid] = true
		f := strings.Fields(m["message"].(string))
		if len(f) != 2 || f[1] != "1" {
			t.Errorf("connection %d: %q, want a fresh work directory", i, m["message"])
		}
		if len(f) > 0 {
			uids[f[0]] = true
		}
		c.close()
		waitFor(t, "the session's end", func() bool { return b.srv.sessionCount() == 0 })
	}
	if st := b.srv.WarmStats(); st.Taken != 3 {
		t.Errorf("WarmStats() = %+v, want 3 taken", st)
	}
	// /environment says how many the box keeps and how many wait.
	waitFor(t, "the pool to refill", func() bool { return b.srv.WarmStats().Ready == 1 })
	_, body := b.get("/environment", b.auth())
	var env protocol.Environment
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("/environment %s: %v", body, err)
	}
	if env.Warm == nil || *env.Warm != (protocol.WarmEnvironment{Size: 1, Ready: 1}) {
		t.Errorf("/environment warm = %+v in %s, want size 1, ready 1", env.Warm, body)
	}
}

// A warm session whose sandbox dies while it waits is replaced, never
// handed out.
func TestWarmSessionKilledIsReplaced(t *testing.T) {
	b := newBox(t, exec.New(), withWarm(1))
	if !b.srv.sb.Report().Has("pid") {
		t.Skip("no session supervisor without namespaces: ", b.srv.sb.Report())
	}
	waitFor(t, "a warm session", func() bool { return b.srv.WarmStats().Ready == 1 })
	b.srv.warm.mu.Lock()
	victim := b.srv.warm.ready[0].ss
	b.srv.warm.mu.Unlock()
	p := victim.workspace.info.Sandbox.SupervisorPid()
	if p <= 0 {
		t.Fatal("the warm session has no supervisor")
	}
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the dead one replaced", func() bool {
		st := b.srv.WarmStats()
		return st.Replaced == 1 && st.Ready == 1
	})
	c := b.dial("/", nil)
	c.prompt("1", `echo alive`)
	if m := last(c.finish("1")); m["message"] != "alive\n" {
		t.Errorf("prompt on the replacement: %v", m)
	}
	if sid := c.hello["session_id"].(string); sid == victim.id {
		t.Errorf("the dead warm session %s was handed out", sid)
	}
	c.close()
}

// countingAgent records how many of its sessions open at once.
type countingAgent struct {
	mu        sync.Mutex
	now, peak int
	opened    int
}

func (a *countingAgent) Open(ctx context.Context, s *agent.Session) (agent.Conversation, error) {
	a.mu.Lock()
	a.now++
	a.opened++
	a.peak = max(a.peak, a.now)
	a.mu.Unlock()
	time.Sleep(30 * time.Millisecond) // a slow start, so that spawns overlap: the subject, not a wait
	a.mu.Lock()
	a.now--
	a.mu.Unlock()
	return agent.Func(func(context.Context, agent.Turn) (string, error) { return "ok", nil }).Open(ctx, s)
}

// Filling a pool of five never prepares more than warmSpawns sessions at
// once, and the pool fills to its size.
func TestWarmRefillUnderCap(t *testing.T) {
	ag := &countingAgent{}
	b := newBox(t, ag, withWarm(5))
	waitFor(t, "five warm sessions", func() bool { return b.srv.WarmStats().Ready == 5 })
	// Taking three refills three, still under the cap.
	for range 3 {
		c := b.dial("/", nil)
		c.prompt("1", "hi")
		if m := last(c.finish("1")); m["message"] != "ok" {
			t.Fatalf("prompt on a warm session: %v", m)
		}
		c.close()
	}
	waitFor(t, "the pool refilled", func() bool { return b.srv.WarmStats().Ready == 5 })
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if ag.peak > warmSpawns || ag.peak < 1 {
		t.Errorf("%d sessions were prepared at once, want 1 to %d", ag.peak, warmSpawns)
	}
	if ag.opened != 8 {
		t.Errorf("%d conversations opened, want 8 (5, then 3 refills)", ag.opened)
	}
}
