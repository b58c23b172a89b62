package kit

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// degradedModes are real sandboxes that lack a protection, made by
// turning layers off in the manifest (as root: no user namespace stands
// in for a uid per session), and the boot problem each must give.
var degradedModes = []struct {
	name string
	sb   func() *protocol.SandboxSpec
	net  *protocol.NetworkSpec
	want []string
}{
	{"sessions not kept apart", func() *protocol.SandboxSpec {
		return &protocol.SandboxSpec{Users: new(false), Mount: new(false)}
	}, nil, []string{"sessions are not kept apart", "remove [sandbox] users = false", "remove [sandbox] mount = false"}},
	{"egress policy not enforced", func() *protocol.SandboxSpec {
		return &protocol.SandboxSpec{Network: new(false)}
	}, &protocol.NetworkSpec{Default: "deny", Allow: []string{"example.test"}}, []string{"the box's egress policy", "advisory", "remove [sandbox] network = false"}},
}

// checkDegradedPlatform skips the test when the sandbox keeps what the
// mode turns off some other way (Landlock standing in for the uids): the
// refusal tested below must be a real one. The kit binary's
// TestDegradedBoot (cmd/glovebox-kit) makes both modes on an emulated
// kernel without Landlock, where they always are.
func checkDegradedPlatform(t *testing.T, sb *protocol.SandboxSpec, net *protocol.NetworkSpec) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the degraded modes are made as root, by turning layers off")
	}
	m := &protocol.Manifest{Sandbox: sb, Network: net}
	s, err := sandbox.New(sandboxConfig(m, nil, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if r.Separation() == "" && (net == nil || r.ConfinesEgress()) {
		t.Skipf("this sandbox (%s) lacks nothing here; cmd/glovebox-kit's TestDegradedBoot covers the mode", r)
	}
}

// TestDegradedBoxRefuses: a kit whose sandbox cannot keep sessions apart,
// or cannot enforce the box's egress policy, does not start; its boot
// error says what is missing, what would give it, and which setting lets
// the box serve anyway. With that setting (in the manifest, or the
// operator's environment variable) it serves, warns, and reports itself
// degraded, to the key only.
func TestDegradedBoxRefuses(t *testing.T) {
	for _, tc := range degradedModes {
		t.Run(tc.name, func(t *testing.T) {
			checkDegradedPlatform(t, tc.sb(), tc.net)
			key := protocol.NewKey()
			m := testManifest(key)
			m.Sandbox, m.Network = tc.sb(), tc.net
			srv, err := New(Options{Manifest: m, Key: key, Root: t.TempDir(), Agent: scripted(nil), Logger: testLogger(t), Getenv: func(string) string { return "" }})
			if err == nil {
				srv.Close(t.Context())
				t.Fatal("New served a degraded box without the opt-in")
			}
			var be *BootError
			if !errors.As(err, &be) {
				t.Fatalf("New = %v, want a *BootError", err)
			}
			var line string
			for _, p := range be.Problems {
				if strings.Contains(p, tc.want[0]) {
					line = p
				}
			}
			if line == "" {
				t.Fatalf("boot problems = %q, want one saying %q", be.Problems, tc.want[0])
			}
			for _, w := range append(tc.want, "allow_degraded = true", "GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1") {
				if !strings.Contains(line, w) {
					t.Errorf("boot problem %q does not say %q", line, w)
				}
			}

			for _, opt := range []struct {
				name string
				f    boxOpt
			}{
				{"manifest", func(m *protocol.Manifest, _ *Options) {
					m.Sandbox, m.Network = tc.sb(), tc.net
					m.Sandbox.AllowDegraded = true
				}},
				{"environment", func(m *protocol.Manifest, o *Options) {
					m.Sandbox, m.Network = tc.sb(), tc.net
					o.Getenv = func(k string) string {
						if k == allowDegradedEnv {
							return "1"
						}
						return ""
					}
				}},
			} {
				t.Run(opt.name, func(t *testing.T) {
					var logs testkit.LogBuffer
					b := newBox(t, scripted(nil), opt.f, func(_ *protocol.Manifest, o *Options) {
						o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))
					})
					if !strings.Contains(logs.String(), "level=WARN msg=\"sandbox: serving degraded (allowed): "+tc.want[0]) {
						t.Errorf("no warning for the gap %q in the boot logs:\n%s", tc.want[0], logs.String())
					}
					c := b.dial("/", nil)
					c.prompt("p", "echo served")
					if f := last(c.finish("p")); f["type"] != "complete" {
						t.Fatalf("prompt on a degraded box = %v", f)
					}
					checkReports(t, b, true)
				})
			}
		})
	}
}

// TestSandboxOffServes: [sandbox] enabled = false is itself the operator's
// choice: the box serves without allow_degraded, warns, and reports
// itself degraded.
func TestSandboxOffServes(t *testing.T) {
	var logs testkit.LogBuffer
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, o *Options) {
		m.Sandbox = &protocol.SandboxSpec{Enabled: new(false)}
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))
	})
	if !strings.Contains(logs.String(), "level=WARN msg=\"sandbox: turned off in the manifest ([sandbox] enabled = false): sessions are not kept apart") {
		t.Errorf("no warning that sessions are not kept apart:\n%s", logs.String())
	}
	checkReports(t, b, true)
}

// TestSandboxReportsPrivate: /health without a credential says nothing
// about the sandbox; with the key or a token, as /environment, it says
// whether the box is degraded and what each layer not in force means.
func TestSandboxReportsPrivate(t *testing.T) {
	b := newBox(t, scripted(nil))
	r := b.srv.sb.Report()
	checkReports(t, b, r.Separation() != "")
}

// checkReports checks /health (without and with a credential) and
// /environment for degraded and one gap per layer not in force.
func checkReports(t *testing.T, b *box, degraded bool) {
	t.Helper()
	r := b.srv.sb.Report()
	layers := append(append([]string{}, protocol.SandboxLayers...), "isolation", "degraded", "gaps")
	for _, h := range []struct {
		name   string
		header map[string][]string
	}{{"no credential", nil}, {"a wrong key", bearer("nope")}, {"an expired token", bearer("gbt1.x.y")}} {
		resp, body := b.get("/health", h.header)
		if resp.StatusCode != 200 {
			t.Fatalf("/health with %s = %d", h.name, resp.StatusCode)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil || got["ok"] != true {
			t.Fatalf("/health with %s = %s, want ok", h.name, body)
		}
		for _, l := range layers {
			if strings.Contains(string(body), `"`+l+`"`) {
				t.Errorf("/health with %s = %s: it names %q", h.name, body, l)
			}
		}
	}
	check := func(what string, gotDegraded *bool, gaps map[string]string) {
		t.Helper()
		if gotDegraded == nil || *gotDegraded != degraded {
			t.Errorf("%s: degraded = %v, want %v", what, gotDegraded, degraded)
		}
		for l := range r.Inactive {
			if l == sandbox.LayerUserNS && r.Has(sandbox.LayerUsers) {
				continue
			}
			if gaps[l] == "" {
				t.Errorf("%s: no gap for the layer %s, which is not in force (%s)", what, l, r.Inactive[l])
			}
		}
		for l := range gaps {
			if r.Has(l) {
				t.Errorf("%s: a gap for the layer %s, which is in force", what, l)
			}
		}
	}
	for _, cred := range []string{b.key, b.token(protocol.ScopeEnvironment)} {
		_, body := b.get("/health", bearer(cred))
		var h protocol.Health
		if err := json.Unmarshal(body, &h); err != nil || !h.OK {
			t.Fatalf("/health with a credential = %s", body)
		}
		if len(h.Isolation) == 0 {
			t.Errorf("/health with a credential = %s: no layers", body)
		}
		check("/health", h.Degraded, h.Gaps)
	}
	_, metrics := b.get("/metrics", b.auth())
	if want := map[bool]string{false: "\nglovebox_sandbox_degraded 0\n", true: "\nglovebox_sandbox_degraded 1\n"}[degraded]; !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	_, body := b.get("/environment", b.auth())
	var env protocol.Environment
	if err := json.Unmarshal(body, &env); err != nil || env.Isolation == nil {
		t.Fatalf("/environment = %s", body)
	}
	check("/environment", env.Isolation.Degraded, env.Isolation.Gaps)
}

// TestShortfallFixes: what a refusal names as the fix follows why each
// layer is not in force: the manifest's own switches, then the platform
// changes that would give a missing layer.
func TestShortfallFixes(t *testing.T) {
	nonRoot := sandbox.Report{
		Active: []string{sandbox.LayerPrivileges},
		Inactive: map[string]string{
			sandbox.LayerUsers:    "the kit does not run as root and user namespaces are not allowed: agents run as the kit's uid",
			sandbox.LayerUserNS:   "user namespaces are not allowed",
			sandbox.LayerMount:    "the kit does not run as root and user namespaces are not allowed",
			sandbox.LayerNetwork:  "the kit does not run as root and user namespaces are not allowed",
			sandbox.LayerLandlock: "the kernel has no Landlock",
		},
	}
	manifestOff := sandbox.Report{
		Active:   []string{sandbox.LayerUsers, sandbox.LayerPrivileges, sandbox.LayerPID},
		Inactive: map[string]string{sandbox.LayerMount: "turned off in the manifest", sandbox.LayerNetwork: "turned off in the manifest"},
	}
	for _, tc := range []struct {
		name    string
		r       sandbox.Report
		egress  bool
		want    []string
		notWant []string
	}{
		{"not root, no user namespaces", nonRoot, true,
			[]string{"sessions are not kept apart", "run the kit as root", "allow user namespaces", "Landlock (Linux 5.13", "egress policy", "Landlock ABI 4"}, []string{"remove [sandbox]"}},
		{"network off in the manifest", manifestOff, true,
			[]string{"egress policy", "remove [sandbox] network = false"}, []string{"sessions are not kept apart", "run the kit as root"}},
		{"no egress policy", manifestOff, false, nil, []string{"egress policy", "sessions are not kept apart"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManifest(protocol.NewKey())
			if tc.egress {
				m.Network = &protocol.NetworkSpec{Default: "deny"}
			}
			s := &Server{man: m}
			var all []string
			for _, sf := range s.shortfalls(tc.r) {
				all = append(all, sf.means+" / "+sf.why+" / "+sf.fix)
			}
			got := strings.Join(all, "\n")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("shortfalls do not say %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("shortfalls say %q:\n%s", w, got)
				}
			}
		})
	}
}
