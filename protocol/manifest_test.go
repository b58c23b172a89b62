package protocol_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

// v1Manifest is glovebox.json as the original build writes it (spec §2.5):
// 2-space JSON, keys in emission order.
const v1Manifest = `{
  "name": "pdf-extractor",
  "version": "0.2.0",
  "base": "glovebox/docs",
  "fs": {
    "work": {
      "path": "/work",
      "writable": true
    },
    "input": {
      "path": "/input",
      "writable": false
    },
    "output": {
      "path": "/output",
      "writable": true
    }
  },
  "env": {
    "ANTHROPIC_API_KEY": {
      "required": true,
      "secret": true,
      "description": "Model key"
    },
    "LOG_LEVEL": {
      "required": false,
      "default": "info"
    }
  },
  "limits": {
    "memory": "2Gi",
    "timeout": "5m"
  },
  "key_fingerprint": "62af8704...b0ef",
  "storage_policy": {
    "inputs": {
      "rules": [
        {
          "use": {
            "adapter": "url"
          },
          "when": {
            "always": true
          }
        },
        {
          "use": {
            "adapter": "inline"
          },
          "when": {
            "default": true
          }
        }
      ]
    },
    "outputs": {
      "rules": [
        {
          "use": {
            "adapter": "inline"
          },
          "when": {
            "sizeBelow": "1MB"
          }
        },
        {
          "use": {
            "adapter": "localServer",
            "options": {
              "ttl": "24h"
            }
          },
          "when": {
            "sizeAbove": "1MB"
          }
        },
        {
          "use": {
            "adapter": "localServer",
            "options": {
              "ttl": "1h"
            }
          },
          "when": {
            "default": true
          }
        }
      ]
    }
  },
  "packages": {
    "apt": [
      "poppler-utils",
      "qpdf"
    ],
    "pip": [
      "pdfplumber"
    ]
  },
  "protocol_version": 1
}
`

func TestParseManifestV1(t *testing.T) {
	t.Parallel()
	m, err := protocol.ParseManifest([]byte(v1Manifest))
	if err != nil {
		t.Fatalf("ParseManifest(v1) error = %v", err)
	}
	want := &protocol.Manifest{
		Name:    "pdf-extractor",
		Version: "0.2.0",
		Base:    "glovebox/docs",
		FS:      protocol.DefaultFS(),
		Env: map[string]protocol.EnvSpec{
			"ANTHROPIC_API_KEY": {Required: true, Secret: true, Description: "Model key"},
			"LOG_LEVEL":         {Default: "info"},
		},
		Limits:         protocol.Limits{Memory: "2Gi", Timeout: "5m"},
		KeyFingerprint: "62af8704...b0ef",
		StoragePolicy: protocol.StoragePolicy{
			Inputs: protocol.DefaultInputsPolicy(),
			Outputs: protocol.Policy{Rules: []protocol.Rule{
				rule("inline", protocol.When{SizeBelow: "1MB"}),
				{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "24h"}}, When: protocol.When{SizeAbove: "1MB"}},
				{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "1h"}}, When: protocol.When{Default: true}},
			}},
		},
		Packages:        protocol.Packages{Apt: []string{"poppler-utils", "qpdf"}, Pip: []string{"pdfplumber"}},
		ProtocolVersion: 1,
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("ParseManifest(v1) mismatch (-want +got):\n%s", diff)
	}
	if err := m.Check(); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
	if got := m.AgentType(); got != protocol.AgentExec {
		t.Errorf("AgentType() = %q, want %q", got, protocol.AgentExec)
	}
}

// TestManifestKeyOrder checks that an encoded manifest has the v1 keys in
// v1 emission order, the additive ones after them.
func TestManifestKeyOrder(t *testing.T) {
	t.Parallel()
	m, err := protocol.ParseManifest([]byte(v1Manifest))
	if err != nil {
		t.Fatal(err)
	}
	m.Agent = &protocol.AgentSpec{Type: "exec"}
	m.Sessions = &protocol.SessionsSpec{MaxQueue: 4}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"name", "version", "base", "fs", "env", "limits", "key_fingerprint", "storage_policy", "packages", "protocol_version", "agent", "sessions"}
	if diff := cmp.Diff(want, topLevelKeys(t, b)); diff != "" {
		t.Errorf("manifest keys (-want +got):\n%s", diff)
	}
	// The v1 parts mean the same JSON as v1 wrote.
	var got, v1 map[string]any
	json.Unmarshal(b, &got)
	json.Unmarshal([]byte(v1Manifest), &v1)
	delete(got, "agent")
	delete(got, "sessions")
	if diff := cmp.Diff(v1, got); diff != "" {
		t.Errorf("re-encoded v1 manifest (-v1 +got):\n%s", diff)
	}
}

func topLevelKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestParseManifestDefaults(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{}`, `null`, `{"name":"","protocol_version":0,"unknown":{"x":1}}`} {
		t.Run(in, func(t *testing.T) {
			m, err := protocol.ParseManifest([]byte(in))
			if err != nil {
				t.Fatalf("ParseManifest(%s) error = %v", in, err)
			}
			want := &protocol.Manifest{
				Name:            "glovebox-app",
				Version:         "0.1.0",
				Base:            "glovebox/base",
				FS:              protocol.DefaultFS(),
				Env:             map[string]protocol.EnvSpec{},
				StoragePolicy:   protocol.StoragePolicy{Inputs: protocol.DefaultInputsPolicy(), Outputs: protocol.DefaultOutputsPolicy()},
				ProtocolVersion: 1,
			}
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("ParseManifest(%s) mismatch (-want +got):\n%s", in, diff)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON := `{"name":"glovebox-app","version":"0.1.0","base":"glovebox/base",` +
				`"fs":{"input":{"path":"/input","writable":false},"output":{"path":"/output","writable":true},"work":{"path":"/work","writable":true}},` +
				`"env":{},"limits":{},"key_fingerprint":"",` +
				`"storage_policy":{"inputs":{"rules":[{"use":{"adapter":"url"},"when":{"always":true}},{"use":{"adapter":"inline"},"when":{"default":true}}]},` +
				`"outputs":{"rules":[{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MB"}},{"use":{"adapter":"localServer","options":{"ttl":"1h"}},"when":{"default":true}}]}},` +
				`"packages":{},"protocol_version":1}`
			if string(b) != wantJSON {
				t.Errorf("json.Marshal(ParseManifest(%s)) =\n%s\nwant\n%s", in, b, wantJSON)
			}
		})
	}
}

func TestParseManifestKeepsGivenFields(t *testing.T) {
	t.Parallel()
	in := `{"fs":{"scratch":{"path":"/scratch","writable":true}},"storage_policy":{"outputs":{"__rules":[{"use":{"adapter":"inline"},"when":{"always":true}}]}},"agent":{"type":"acp","command":["npx","agent"],"env":{"A":"1"}}}`
	m, err := protocol.ParseManifest([]byte(in))
	if err != nil {
		t.Fatalf("ParseManifest(%s) error = %v", in, err)
	}
	// v1 replaces whole fields: giving fs drops the default mounts.
	if diff := cmp.Diff(map[string]protocol.Mount{"scratch": {Path: "/scratch", Writable: true}}, m.FS); diff != "" {
		t.Errorf("FS mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(protocol.DefaultInputsPolicy(), m.StoragePolicy.Inputs); diff != "" {
		t.Errorf("inputs policy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]protocol.Rule{rule("inline", protocol.When{Always: true})}, m.StoragePolicy.Outputs.Rules); diff != "" {
		t.Errorf("outputs policy (-want +got):\n%s", diff)
	}
	if got := m.AgentType(); got != protocol.AgentACP {
		t.Errorf("AgentType() = %q, want %q", got, protocol.AgentACP)
	}
}

func TestParseManifestError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{``, "manifest is not valid JSON: unexpected end of JSON input"},
		{`{"name":`, "manifest is not valid JSON"},
		{`[]`, "manifest is not valid JSON: json: cannot unmarshal array"},
		{`{"name":1}`, "manifest is not valid JSON: json: cannot unmarshal number"},
		{`{"fs":{"work":{"path":"/w","writable":"yes"}}}`, "manifest is not valid JSON: json: cannot unmarshal string"},
		{`{"protocol_version":"1"}`, "manifest is not valid JSON"},
		{`{"storage_policy":{"outputs":[]}}`, "manifest is not valid JSON"},
	}
	for _, tt := range tests {
		m, err := protocol.ParseManifest([]byte(tt.in))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("ParseManifest(%s) = %+v, %v, want an error starting %q", tt.in, m, err, tt.want)
		}
	}
}

func TestManifestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*protocol.Manifest)
		want   []string // the error's lines; none for a valid manifest
	}{
		{"valid", func(*protocol.Manifest) {}, nil},
		{"protocol version", func(m *protocol.Manifest) { m.ProtocolVersion = 2 },
			[]string{"manifest: protocol_version 2 is not supported (this kit speaks 1)"}},
		{"relative path", func(m *protocol.Manifest) { m.FS["work"] = protocol.Mount{Path: "work", Writable: true} },
			[]string{`manifest: fs.work.path "work" must be a clean absolute path other than /`}},
		{"unclean path", func(m *protocol.Manifest) { m.FS["output"] = protocol.Mount{Path: "/a/../output", Writable: true} },
			[]string{`manifest: fs.output.path "/a/../output" must be a clean absolute path other than /`}},
		{"root path", func(m *protocol.Manifest) { m.FS["input"] = protocol.Mount{Path: "/"} },
			[]string{`manifest: fs.input.path "/" must be a clean absolute path other than /`}},
		{"read-only work", func(m *protocol.Manifest) { m.FS["work"] = protocol.Mount{Path: "/work"} },
			[]string{"manifest: fs.work must be writable"}},
		{"bad env name", func(m *protocol.Manifest) { m.Env["1BAD"] = protocol.EnvSpec{} },
			[]string{`manifest: env "1BAD" is not a valid variable name (letters, digits and _, not starting with a digit)`}},
		{"bad max_message", func(m *protocol.Manifest) { m.Limits.MaxMessage = "100MiB" },
			[]string{`manifest: limits.max_message: size "100MiB" has unit "MiB": want B, KB, MB or GB (1024-based)`}},
		{"bad timeout", func(m *protocol.Manifest) { m.Limits.Timeout = "5 minutes" },
			[]string{`manifest: limits.timeout: duration "5 minutes": want a number and a unit s, m, h or d (e.g. "30s", "5m", "24h")`}},
		{"limits cpu and memory as v1 writes them", func(m *protocol.Manifest) { m.Limits.CPU = "500m"; m.Limits.Memory = "1Gi"; m.Limits.Disk = "512MB" }, nil},
		{"bad limits cpu, memory and disk", func(m *protocol.Manifest) { m.Limits.CPU = "2 cores"; m.Limits.Memory = "lots"; m.Limits.Disk = "-1Gi" },
			[]string{
				`manifest: limits.memory: size "lots" has unit "lots": want B, KB, MB or GB (1024-based) (or a quantity such as 2Gi)`,
				`manifest: limits.disk: "-1Gi" is not a size such as 512MB or 2Gi`,
				`manifest: limits.cpu: "2 cores" is not a number of cores (such as "1" or "0.5")`,
			}},
		{"sandbox", func(m *protocol.Manifest) {
			m.Sandbox = &protocol.SandboxSpec{Require: []string{"mount", "vm"}, UIDBase: 10}
		}, []string{
			`manifest: sandbox.require: "vm" is not a layer (one of users, userns, privileges, mount, pid, network, cgroup, landlock, seccomp)`,
			"manifest: sandbox.uid_base 10 would share uids with the image's own users; use 1000 or more (default 200000)",
		}},
		{"bad outputs bound", func(m *protocol.Manifest) {
			m.StoragePolicy.Outputs.Rules[0].When.SizeBelow = "1MiB"
		}, []string{`manifest: storage_policy.outputs: rule 1 (inline): sizeBelow: size "1MiB" has unit "MiB": want B, KB, MB or GB (1024-based)`}},
		{"empty inputs policy", func(m *protocol.Manifest) { m.StoragePolicy.Inputs.Rules = []protocol.Rule{} },
			[]string{"manifest: storage_policy.inputs: policy has no rules"}},
		{"unknown agent", func(m *protocol.Manifest) { m.Agent = &protocol.AgentSpec{Type: "llm"} },
			[]string{`manifest: agent.type "llm" is not one of exec, acp, go`}},
		{"acp without command", func(m *protocol.Manifest) { m.Agent = &protocol.AgentSpec{Type: "acp"} },
			[]string{`manifest: agent type "acp" needs a command, e.g. ["npx", "my-agent"]`}},
		{"exec with command", func(m *protocol.Manifest) { m.Agent = &protocol.AgentSpec{Type: "exec", Command: []string{"x"}} },
			[]string{`manifest: agent.command is only for agent type "acp"`}},
		{"agent env name", func(m *protocol.Manifest) {
			m.Agent = &protocol.AgentSpec{Type: "acp", Command: []string{"a"}, Env: map[string]string{"A-B": "1"}}
		}, []string{`manifest: agent.env "A-B" is not a valid variable name`}},
		{"sessions", func(m *protocol.Manifest) { m.Sessions = &protocol.SessionsSpec{ResumeGrace: "-1s", MaxQueue: -1} },
			[]string{`manifest: sessions.resume_grace: duration "-1s" must be positive`, "manifest: sessions.max and sessions.max_queue must not be negative"}},
		{"every problem, one line each, in order", func(m *protocol.Manifest) {
			m.ProtocolVersion = 3
			m.FS["output"] = protocol.Mount{Path: "out"}
			m.Env["B-2"] = protocol.EnvSpec{}
			m.Env["A-1"] = protocol.EnvSpec{}
		}, []string{
			"manifest: protocol_version 3 is not supported (this kit speaks 1)",
			`manifest: fs.output.path "out" must be a clean absolute path other than /`,
			"manifest: fs.output must be writable",
			`manifest: env "A-1" is not a valid variable name (letters, digits and _, not starting with a digit)`,
			`manifest: env "B-2" is not a valid variable name (letters, digits and _, not starting with a digit)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := protocol.ParseManifest([]byte(v1Manifest))
			if err != nil {
				t.Fatal(err)
			}
			tt.change(m)
			err = m.Check()
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check() lines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManifestEnvironment checks the /environment body: v1's keys in v1's
// order, then the additive ones.
func TestManifestEnvironment(t *testing.T) {
	t.Parallel()
	m, err := protocol.ParseManifest([]byte(`{"name":"t","limits":{"timeout":"5m"},"agent":{"type":"exec"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m.Environment([]string{protocol.CapSeq}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"t","version":"0.1.0","base":"glovebox/base",` +
		`"fs":{"input":{"path":"/input","writable":false},"output":{"path":"/output","writable":true},"work":{"path":"/work","writable":true}},` +
		`"packages":{},"limits":{"timeout":"5m"},"protocol_version":1,"capabilities":["seq"],"agent":"exec","warm":{"size":1}}`
	if string(b) != want {
		t.Errorf("Environment() = %s, want %s", b, want)
	}
	// The spec's example body decodes into the same view.
	v1 := `{"name":"t","version":"0.1.0","base":"glovebox/base","fs":{"work":{"path":"/work","writable":true},"input":{"path":"/input","writable":false},"output":{"path":"/output","writable":true}},"packages":{},"limits":{"timeout":"5m"},"protocol_version":1}`
	var env protocol.Environment
	if err := json.Unmarshal([]byte(v1), &env); err != nil {
		t.Fatal(err)
	}
	wantEnv := m.Environment(nil)
	wantEnv.Agent = ""
	wantEnv.Warm = nil
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("v1 /environment body (-want +got):\n%s", diff)
	}
}
