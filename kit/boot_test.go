package kit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestBootProblems(t *testing.T) {
	root := t.TempDir()
	// A file where the output mount should be: it cannot be created.
	os.WriteFile(filepath.Join(root, "output"), []byte("in the way"), 0o644)
	// The state dir's parent is a file too.
	os.WriteFile(filepath.Join(root, "var"), nil, 0o644)

	key := protocol.NewKey()
	m := testManifest("another key")
	m.Env = map[string]protocol.EnvSpec{
		"API_TOKEN": {Required: true},
		"WITH_DEF":  {Required: true, Default: "d"},
		"SET":       {Required: true},
	}
	m.StoragePolicy.Outputs = protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "s3"}, When: protocol.When{Always: true}}}}
	m.Limits.Timeout = "soon"
	_, err := New(Options{
		Manifest: m, Key: key, Root: root, Agent: scripted(nil), Logger: testLogger(t),
		Getenv: func(k string) string {
			if k == "SET" {
				return "yes"
			}
			return ""
		},
	})
	var be *BootError
	if !errors.As(err, &be) {
		t.Fatalf("New = %v, want a *BootError", err)
	}
	for _, want := range []string{
		`limits.timeout`,
		"GLOVEBOX_KEY does not match the manifest's key_fingerprint",
		"missing required env var API_TOKEN",
		"fs.output: cannot create",
		"state dir: cannot create",
		"unregistered adapter: s3",
	} {
		n := 0
		for _, p := range be.Problems {
			if strings.Contains(p, want) {
				n++
			}
			if strings.Contains(p, "\n") {
				t.Errorf("problem spans lines: %q", p)
			}
		}
		if n != 1 {
			t.Errorf("%d lines say %q; want 1. Problems:\n%s", n, want, err)
		}
	}
	for _, p := range be.Problems {
		if strings.Contains(p, "WITH_DEF") || strings.Contains(p, " SET") {
			t.Errorf("unexpected problem %q", p)
		}
	}
}

func TestBootKeyAndAgent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*Options)
		want string
	}{
		{"no key", func(o *Options) { o.Key = "" }, "GLOVEBOX_KEY is not set"},
		{"blank key", func(o *Options) { o.Key = "  " }, "GLOVEBOX_KEY is not set"},
		{"no agent", func(o *Options) { o.Agent = nil }, "no agent"},
		{"no manifest", func(o *Options) { o.Manifest = nil }, "manifest: none given"},
		{"no fingerprint", func(o *Options) { o.Manifest.KeyFingerprint = "" }, "key_fingerprint is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := protocol.NewKey()
			o := Options{Manifest: testManifest(key), Key: key, Root: t.TempDir(), Agent: scripted(nil), Logger: testLogger(t)}
			tc.opts(&o)
			srv, err := New(o)
			if err == nil {
				srv.Close(t.Context())
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestAgentEnv(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, o *Options) {
		m.Env = map[string]protocol.EnvSpec{"MODE": {Default: "fast"}, "FROM_KIT": {}}
		m.Agent = &protocol.AgentSpec{Type: "go", Env: map[string]string{"AGENT_VAR": "1"}}
		o.Environ = []string{"GLOVEBOX_KEY=leak", "PATH=/bin", "FROM_KIT=old"}
		o.Getenv = func(k string) string {
			if k == "FROM_KIT" {
				return "new"
			}
			return ""
		}
	})
	c := b.dial("/", nil)
	for v, want := range map[string]string{"MODE": "fast", "FROM_KIT": "new", "AGENT_VAR": "1", "PATH": "/bin", "GLOVEBOX_KEY": "<unset>", "GLOVEBOX_SESSION": c.hello["session_id"].(string)} {
		c.prompt("e", "env "+v)
		if got := last(c.finish("e"))["message"]; got != want {
			t.Errorf("agent env %s = %v, want %q", v, got, want)
		}
	}
}
