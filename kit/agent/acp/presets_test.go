package acp_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/generator"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/acp"
	"github.com/glovebox-dev/glovebox/kit/agent/acp/internal/testagents"
	"github.com/glovebox-dev/glovebox/protocol"
)

// presetAgent is a preset's box as `gbx generate` makes it: its manifest,
// and its npm packages installed from the lock generate writes (resolved
// from the npm registry), with npm ci as the image build does, into a
// directory whose node_modules/.bin stands for the image's /bin.
type presetAgent struct {
	manifest *protocol.Manifest
	bin      string // the directory of the preset's programs
	secret   string // the preset's API key variable
}

func preparePreset(t *testing.T, name string) presetAgent {
	t.Helper()
	testagents.Node(t)
	c, err := generator.Parse("glovebox.toml", []byte("name = \"p\"\n[agent]\npreset = \""+name+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Packages.Npm) == 0 {
		t.Skipf("preset %s comes from nixpkgs (%v), which only a real Nix build installs", name, c.Packages.Nix)
	}
	lock, err := generator.ResolveNpm(context.Background(), c, nil)
	if errors.Is(err, generator.ErrNpmIncomplete) {
		// Not the network: the registry reached lacks packages of the tree
		// (a partial mirror), so no lock from it can be built or run.
		t.Skipf("the npm registry reached here lacks packages of preset %s: %v", name, err)
	}
	if err != nil {
		testagents.Skip(t, fmt.Sprintf("the npm registry is needed to lock preset %s (offline?): %v", name, err))
	}
	dir := testagents.Lock(t, "preset-"+name, generator.NpmManifest(c), lock)
	m := c.Manifest(protocol.Fingerprint(testKeyValue))
	if m.Network == nil || m.Network.Default != protocol.NetworkDeny {
		t.Fatalf("preset %s: network %+v, want default deny", name, m.Network)
	}
	return presetAgent{manifest: m, bin: filepath.Join(dir, "node_modules", ".bin"), secret: generator.Presets[name].Secret}
}

var testKeyValue = protocol.NewKey()

// presetStart bounds a preset agent's start and handshake: node's cold
// start of a large CLI on a loaded machine takes long; above the kit's
// own handshake timeout, so a hang fails as the kit's error.
const presetStart = 2*time.Minute + 30*time.Second

// servePreset serves the preset's box in a real kit: sandboxed sessions,
// the egress proxy with the preset's policy (deny all but the API host),
// the API key brokered; the agents' PATH leads to the preset's programs,
// by name, as the image's /bin does. warm is the warm pool's size.
func servePreset(t testing.TB, p presetAgent, warm int, level slog.Level, opts ...func(*kit.Options)) *acpKit {
	t.Helper()
	m := *p.manifest
	spec := *m.Agent
	spec.Warm = &warm
	m.Agent = &spec
	// Uids of this kit's own: a sandbox kills every process of a uid its
	// session ended with, and kits of other tests, in this process and in
	// other packages' test binaries, hand out the default range.
	base := uidBase()
	m.Sandbox = &protocol.SandboxSpec{UIDBase: base, UIDCount: uidsPerKit}
	log := testkit.Logger(t, level)
	ag, err := acp.New(m.Agent, log)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	env := []string{"PATH=" + p.bin + ":/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	o := kit.Options{Manifest: &m, Key: testKeyValue, Root: root, Agent: ag, Logger: log, Environ: env,
		Getenv: func(k string) string {
			if k == p.secret {
				return "sk-test-not-a-real-key"
			}
			return ""
		}}
	for _, f := range opts {
		f(&o)
	}
	srv, err := kit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	closeKit := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("kit Close: %v", err)
		}
		ts.Close()
	}
	t.Cleanup(closeKit)
	return &acpKit{srv: srv, url: ts.URL, key: testKeyValue, root: root, close: closeKit, uidBase: base}
}

const uidsPerKit = 16

var nextKit atomic.Int64

// uidBase is a range of uids no other kit of the test binaries hands out:
// 400000 and up, by process and by kit.
func uidBase() int {
	return 400000 + (os.Getpid()%4096)*1024 + int(nextKit.Add(1)%64)*uidsPerKit
}

// waitWarm waits until the pool holds n handshaken sessions (the agent
// started in its sandbox, initialize and session/new answered).
func waitWarm(t testing.TB, k *acpKit, n int, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(presetStart); k.srv.WarmStats().Ready < n; time.Sleep(5 * time.Millisecond) {
		if st := k.srv.WarmStats(); st.Failed > 0 || time.Now().After(deadline) {
			t.Fatalf("no warm %s session (the agent started in its sandbox, then initialize and session/new) within %v: %+v", what, presetStart, st)
		}
	}
	return time.Since(start)
}

// TestPresetAgentsOffline: every npm preset's agent CLI, installed from
// the lock gbx generate makes, starts in a sandboxed session of a box
// whose network is closed but for the agent's API host, and answers
// initialize and session/new (the warm pool's handshake) with nothing
// downloaded; a client then gets that session. No npx, no registry at
// session time.
func TestPresetAgentsOffline(t *testing.T) {
	t.Parallel()
	for _, name := range generator.PresetNames() {
		t.Run(name, func(t *testing.T) {
			p := preparePreset(t, name)
			cmd := p.manifest.Agent.Command[0]
			if _, err := os.Stat(filepath.Join(p.bin, cmd)); err != nil {
				t.Fatalf("the lock installs no %s: %v", cmd, err)
			}
			k := servePreset(t, p, 1, slog.LevelInfo)
			waitWarm(t, k, 1, name)
			c := dial(t, k.url, k.key)
			defer c.close()
			if hello := c.next(); hello["type"] != "hello" {
				t.Fatalf("first frame %v, want hello", hello)
			}
			if st := k.srv.WarmStats(); st.Taken != 1 || st.Failed != 0 {
				t.Errorf("WarmStats() = %+v, want the session taken warm", st)
			}
		})
	}
}

var npxBench = flag.Bool("npx", false, "BenchmarkPresetFirstAnswer: also measure the npx form, which downloads the agent from the npm registry into an empty npm cache")

// BenchmarkPresetFirstAnswer measures the claude-code preset's new
// session to the agent's first answer: from the client's connection to
// the first event of its first prompt, which the agent can send only
// once it has started in its sandbox and answered initialize and
// session/new (Claude Code's adapter announces its commands after
// session/new; the kit hands them to the first prompt). The kit's own
// egress events (the agent's connection attempts) do not count.
//
//   - cold: a box without a warm pool starts the agent for the session,
//     from the lock's install (the image's form)
//   - warm: the session comes from the warm pool, its handshake done
//   - npx (with -npx): the README's former form, `npx -y` downloading the
//     adapter from the npm registry into an empty npm cache, as every
//     session of a fresh container does
//
// Run: go test ./kit/agent/acp -run '^$' -bench PresetFirstAnswer -benchtime 5x [-npx]
func BenchmarkPresetFirstAnswer(b *testing.B) {
	c, err := generator.Parse("glovebox.toml", []byte("name = \"p\"\n[agent]\npreset = \"claude-code\"\n"))
	if err != nil {
		b.Fatal(err)
	}
	lock, err := generator.ResolveNpm(context.Background(), c, nil)
	if err != nil {
		b.Skipf("the npm registry is needed to lock the preset: %v", err)
	}
	dir := testagents.Lock(b, "preset-claude-code", generator.NpmManifest(c), lock)
	p := presetAgent{manifest: c.Manifest(protocol.Fingerprint(testKeyValue)), bin: filepath.Join(dir, "node_modules", ".bin"), secret: "ANTHROPIC_API_KEY"}

	var total time.Duration
	var n int
	report := func(b *testing.B) {
		if n > 0 {
			b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms/first-answer")
		}
		total, n = 0, 0
	}
	measure := func(b *testing.B, p presetAgent, warm int) {
		{
			b.StopTimer()
			k := servePreset(b, p, warm, slog.LevelWarn)
			if warm > 0 {
				waitWarm(b, k, warm, "claude-code")
			}
			b.StartTimer()
			start := time.Now()
			cl := dial(b, k.url, k.key)
			if hello := cl.next(); hello["type"] != "hello" {
				b.Fatalf("first frame %v, want hello", hello)
			}
			cl.prompt("p1", "Say hello.", nil)
			first := cl.until(func(m map[string]any) bool { return m["id"] == "p1" && m["event_type"] != protocol.EventEgress })
			d := time.Since(start)
			b.StopTimer()
			total, n = total+d, n+1
			f := first[len(first)-1]
			if f["type"] != "event" {
				b.Fatalf("the prompt's first frame %v, want an event", f)
			}
			b.Logf("first answer after %v: %v %v", d, f["type"], f["event_type"])
			cl.close()
			k.close()
			b.StartTimer()
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			measure(b, p, 0)
		}
		report(b)
	})
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			measure(b, p, 1)
		}
		report(b)
	})
	if !*npxBench {
		return
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		b.Skip("npx is not installed")
	}
	b.Run("npx", func(b *testing.B) {
		m := *p.manifest
		spec := *m.Agent
		spec.Command = []string{npx, "-y", c.Packages.Npm[0]}
		spec.Env = map[string]string{"npm_config_update_notifier": "false"}
		m.Agent = &spec
		// npx needs the registry. Its name resolves to an address of a
		// documentation range on this machine's network, which the egress
		// proxy opens only when an allow rule names it. npm's cache is in
		// the session's HOME, its work directory: empty for every new
		// session, as in a new container.
		m.Network = &protocol.NetworkSpec{Default: protocol.NetworkDeny, Allow: []string{"api.anthropic.com:443", "registry.npmjs.org:443"}}
		if addrs, err := net.LookupHost("registry.npmjs.org"); err == nil {
			for _, a := range addrs {
				if ip := net.ParseIP(a); ip != nil && ip.To4() != nil {
					m.Network.Allow = append(m.Network.Allow, a+"/32:443")
				}
			}
		}
		q := p
		q.manifest = &m
		for b.Loop() {
			measure(b, q, 0)
		}
		report(b)
	})
}
