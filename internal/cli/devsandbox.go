package cli

// What gbx dev says of the sandbox on the developer's machine. gbx dev
// serves degraded where the kit's layers cannot keep sessions apart (it
// runs the developer's own prompts), and says so: the banner names the
// layers in force, those that are not and why, and what prompts cannot
// see; a warning names each PATH entry the sessions cannot reach (as
// root, prompts run under session uids and a private /tmp); and a command
// that then fails with 126 or 127 gets a line saying why.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// allowDegraded returns m with sandbox.allow_degraded set: a box on the
// developer's machine serves with whatever layers the machine allows.
func allowDegraded(m *protocol.Manifest) *protocol.Manifest {
	c := *m
	sb := protocol.SandboxSpec{}
	if m.Sandbox != nil {
		sb = *m.Sandbox
	}
	sb.AllowDegraded = true
	c.Sandbox = &sb
	return &c
}

// boxEnvironment reads GET /environment of the box at url (ws://...).
func boxEnvironment(ctx context.Context, url, key string) (*protocol.Environment, error) {
	base := strings.Replace(strings.Replace(url, "ws://", "http://", 1), "wss://", "https://", 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/environment", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Close = true // one request: no idle connection left to the box
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the box's /environment: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the box's /environment: %s", resp.Status)
	}
	var env protocol.Environment
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("read the box's /environment: %w", err)
	}
	return &env, nil
}

// devSandbox is what gbx dev knows of the sandbox its box got.
type devSandbox struct {
	report  sandbox.Report
	network *protocol.EgressEnvironment // nil without an egress proxy
	// unreachable are the agents' PATH entries the sessions cannot reach.
	unreachable []pathEntry
}

// pathEntry is a PATH entry and why sessions cannot reach it.
type pathEntry struct {
	Dir, Why string
}

// newDevSandbox reads the sandbox report from env and checks path, the
// agents' PATH, against it.
func newDevSandbox(env *protocol.Environment, path string) *devSandbox {
	d := &devSandbox{network: env.Network}
	if iso := env.Isolation; iso != nil {
		d.report = sandbox.Report{Active: iso.Active, Inactive: iso.Inactive, UIDs: iso.UIDs, Cgroup: iso.Cgroup, Landlock: iso.Landlock}
	}
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		if why := unreachable(dir, d.report); why != "" {
			d.unreachable = append(d.unreachable, pathEntry{dir, why})
		}
	}
	return d
}

// unreachable says why a session's processes cannot reach dir under the
// layers of r, or "" when they can (or dir does not exist here, which is
// no business of the sandbox's).
func unreachable(dir string, r sandbox.Report) string {
	if !filepath.IsAbs(dir) {
		return "it is relative, so prompts look for it in their session's work directory"
	}
	dir = filepath.Clean(dir)
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	paths := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		paths = append(paths, real)
	}
	for _, p := range paths {
		if r.Has(sandbox.LayerMount) {
			for _, tmp := range []string{"/tmp", "/dev/shm"} {
				if p == tmp || strings.HasPrefix(p, tmp+"/") {
					return fmt.Sprintf("it is under %s, of which each session has a private one", tmp)
				}
			}
		}
		if r.Has(sandbox.LayerUsers) {
			// A session's uid owns none of the path and is in none of its
			// groups: only the permission bits for others count.
			if blocked, mode := unsearchable(p); blocked != "" {
				return fmt.Sprintf("%s is mode %04o, which other users cannot enter", blocked, mode)
			}
		}
	}
	return ""
}

// unsearchable returns the first directory on the way to dir (dir
// included) that others may not search, and its mode.
func unsearchable(dir string) (string, os.FileMode) {
	cur := "/"
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			if parts[i] == "" {
				continue
			}
			cur = filepath.Join(cur, parts[i])
		}
		st, err := os.Stat(cur)
		if err != nil {
			return "", 0
		}
		if st.IsDir() && st.Mode().Perm()&0o001 == 0 {
			return cur, st.Mode().Perm()
		}
	}
	return "", 0
}

// degraded says what the box lacks that a deployed box would refuse to
// start without, or "".
func (d *devSandbox) degraded() string {
	var out []string
	if why := d.report.Separation(); why != "" {
		out = append(out, "sessions are not kept apart: "+why)
	}
	if d.network != nil && !d.report.ConfinesEgress() {
		out = append(out, "the [network] policy is advisory: a process that ignores the proxy variables reaches the network directly")
	}
	return strings.Join(out, "; ")
}

// hidden lists what prompts cannot see or reach on this machine.
func (d *devSandbox) hidden(home string) []string {
	r := d.report
	var out []string
	if home != "" && filepath.IsAbs(home) && r.Has(sandbox.LayerUsers) {
		if blocked, mode := unsearchable(filepath.Clean(home)); blocked != "" {
			out = append(out, fmt.Sprintf("your home %s (%s is mode %04o)", home, blocked, mode))
		}
	}
	if r.Has(sandbox.LayerMount) {
		out = append(out, "/tmp and /dev/shm (each session has its own)")
	}
	if d.report.Separation() == "" {
		out = append(out, "other sessions' directories and the box's state")
	}
	if r.Has(sandbox.LayerPID) {
		out = append(out, "other processes")
	}
	if r.Has(sandbox.LayerNetwork) {
		out = append(out, "this machine's localhost (each session has its own loopback; the way out is the box's egress proxy)")
	}
	return out
}

// bannerLines are the banner's sandbox lines.
func (d *devSandbox) bannerLines(home string) string {
	var b strings.Builder
	r := d.report
	active := make([]string, 0, len(r.Active))
	for _, l := range r.Active {
		switch {
		case l == sandbox.LayerUsers && r.UIDs != "":
			l += " (a uid per session, " + r.UIDs + ")"
		case l == sandbox.LayerLandlock && r.Landlock > 0:
			l += fmt.Sprintf(" (ABI %d)", r.Landlock)
		}
		active = append(active, l)
	}
	if len(active) == 0 {
		active = []string{"no layer"}
	}
	fmt.Fprintf(&b, "  sandbox  %s\n", strings.Join(active, ", "))
	if len(r.Inactive) > 0 {
		keys := make([]string, 0, len(r.Inactive))
		for k := range r.Inactive {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			keys[i] = k + " (" + r.Inactive[k] + ")"
		}
		fmt.Fprintf(&b, "  lacks    %s\n", strings.Join(keys, "; "))
	}
	if h := d.hidden(home); len(h) > 0 {
		fmt.Fprintf(&b, "  hidden   from prompts: %s\n", strings.Join(h, "; "))
	}
	if why := d.degraded(); why != "" {
		fmt.Fprintf(&b, "  DEGRADED %s (gbx dev serves anyway; a deployed box would refuse to start unless [sandbox] allow_degraded = true)\n", why)
	}
	return b.String()
}

// warnings are gbx dev's lines for stderr: the degraded sandbox, and the
// PATH entries sessions cannot reach, by name, one line per reason.
func (d *devSandbox) warnings() []string {
	var out []string
	if why := d.degraded(); why != "" {
		out = append(out, "gbx dev: warning: the sandbox is DEGRADED on this machine: "+why)
	}
	var whys []string
	dirs := map[string][]string{}
	for _, e := range d.unreachable {
		if dirs[e.Why] == nil {
			whys = append(whys, e.Why)
		}
		dirs[e.Why] = append(dirs[e.Why], e.Dir)
	}
	for _, why := range whys {
		entries := "PATH entry " + dirs[why][0] + " is"
		if len(dirs[why]) > 1 {
			entries = "PATH entries " + strings.Join(dirs[why], ", ") + " are"
		}
		out = append(out, fmt.Sprintf("gbx dev: warning: %s not reachable by the sessions' processes (%s): tools there fail with \"Permission denied\" or \"not found\"; %s", entries, why, remedy(why)))
	}
	return out
}

// remedy says what to do about a PATH entry sessions cannot reach, given
// why.
func remedy(why string) string {
	switch {
	case strings.HasPrefix(why, "it is relative"):
		return "use an absolute path"
	case strings.HasPrefix(why, "it is under"):
		return "install the tools outside /tmp (e.g. in /usr/local/bin)"
	}
	return "install them system-wide (e.g. in /usr/local/bin), or run gbx dev as your own user instead of root (sessions then run as your uid)"
}

// explain is the line for a command that ended after printing stderr,
// when stderr shows a program living in a PATH entry sessions cannot
// reach was not found or not permitted ("name: Permission denied", "name:
// not found", "name: command not found"), or the command exited with 126
// or 127 and stderr names such a program; "" otherwise.
func (d *devSandbox) explain(code int, stderr string) string {
	if len(d.unreachable) == 0 || stderr == "" {
		return ""
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(stderr, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.+", r))
	}) {
		words[w] = true
	}
	failed := func(name string) bool {
		if code == 126 || code == 127 {
			return true
		}
		for _, msg := range []string{": Permission denied", ": not found", ": command not found", ": No such file or directory"} {
			if strings.Contains(stderr, name+msg) {
				return true
			}
		}
		return false
	}
	for _, e := range d.unreachable {
		if !filepath.IsAbs(e.Dir) {
			continue
		}
		entries, err := os.ReadDir(e.Dir)
		if err != nil {
			continue
		}
		for _, f := range entries {
			if words[f.Name()] && failed(f.Name()) {
				return fmt.Sprintf("gbx dev: %s is in %s, which the session's processes cannot reach (%s): %s", f.Name(), e.Dir, e.Why, remedy(e.Why))
			}
		}
	}
	return ""
}

// devAgent wraps a box's agent for gbx dev: when an exec command exits
// with 126 or 127 because a program it ran sits where the sandbox keeps
// sessions out, the prompt's stderr and gbx dev's get a line saying so.
type devAgent struct {
	agent.Agent
	sb     atomic.Pointer[devSandbox] // set once the box has booted
	notify func(line string)          // gbx dev's stderr
}

var _ agent.Agent = (*devAgent)(nil)

// Open implements agent.Agent.
func (a *devAgent) Open(ctx context.Context, s *agent.Session) (agent.Conversation, error) {
	conv, err := a.Agent.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	dc := devConversation{Conversation: conv, a: a}
	if w, ok := conv.(agent.Warmer); ok {
		return devWarmConversation{dc, w}, nil
	}
	return dc, nil
}

type devConversation struct {
	agent.Conversation
	a *devAgent
}

type devWarmConversation struct {
	devConversation
	agent.Warmer
}

var (
	_ agent.Conversation = devConversation{}
	_ agent.Warmer       = devWarmConversation{}
)

// Prompt implements agent.Conversation.
func (c devConversation) Prompt(ctx context.Context, t agent.Turn) (string, error) {
	return c.Conversation.Prompt(ctx, &devTurn{Turn: t, a: c.a})
}

// devTurn watches the exec agent's events: its stderr, and its exit.
type devTurn struct {
	agent.Turn
	a      *devAgent
	mu     sync.Mutex
	stderr []byte // the last stderrKeep bytes
}

// stderrKeep is how much of a command's stderr is kept to find a
// program's name in.
const stderrKeep = 16 << 10

// Emit implements agent.Turn.
func (t *devTurn) Emit(eventType string, data any) error {
	switch d := data.(type) {
	case exec.TextDelta:
		if d.Stream == exec.Stderr {
			t.mu.Lock()
			t.stderr = append(t.stderr, d.Text...)
			if n := len(t.stderr); n > stderrKeep {
				t.stderr = append(t.stderr[:0], t.stderr[n-stderrKeep:]...)
			}
			t.mu.Unlock()
		}
	case exec.Exit:
		t.mu.Lock()
		stderr := string(t.stderr)
		t.mu.Unlock()
		if sb := t.a.sb.Load(); sb != nil && d.Signal == "" {
			if line := sb.explain(d.Code, stderr); line != "" {
				if t.a.notify != nil {
					t.a.notify(line)
				}
				if err := t.Turn.Emit(exec.EventTextDelta, exec.TextDelta{Text: line + "\n", Stream: exec.Stderr}); err != nil {
					return err
				}
			}
		}
	}
	return t.Turn.Emit(eventType, data)
}
