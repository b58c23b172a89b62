package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// noLandlockEnv makes the kit the tests start run as on a kernel without
// Landlock (nolandlock_linux_test.go): a seccomp filter, inherited by
// everything it starts, answers the Landlock system calls with ENOSYS. The
// degraded modes the tests make by turning layers off then stay degraded
// where Landlock would stand in for them.
const noLandlockEnv = "GLOVEBOX_TEST_NO_LANDLOCK"

// writeSandboxManifest writes an exec box's manifest with sb as its
// [sandbox].
func writeSandboxManifest(t *testing.T, key string, sb *protocol.SandboxSpec) string {
	m, _ := protocol.ParseManifest([]byte(`{"name":"cmd","agent":{"type":"exec","warm":0}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.Sandbox = sb
	b, _ := json.Marshal(m)
	p := filepath.Join(t.TempDir(), "glovebox.json")
	os.WriteFile(p, b, 0o644)
	return p
}

// TestDegradedBoot: a kit whose sandbox cannot keep sessions apart (as
// root, with the uid per session and the mount namespace turned off, on a
// kernel without Landlock), or cannot enforce the box's egress policy (no
// network namespace, no Landlock), does not serve: it exits 1 with a line
// naming what is missing and the settings that let it serve. With
// GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1 it serves, and says so to the key only.
func TestDegradedBoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the degraded modes are made as root, by turning layers off")
	}
	for _, tc := range []struct {
		name string
		sb   *protocol.SandboxSpec
		net  bool
		want []string
		gap  string
	}{
		{"sessions not kept apart", &protocol.SandboxSpec{Users: new(false), Mount: new(false)}, false,
			[]string{"glovebox-kit: sandbox: sessions are not kept apart", "remove [sandbox] users = false"}, "users"},
		{"egress policy not enforced", &protocol.SandboxSpec{Network: new(false)}, true,
			[]string{"glovebox-kit: sandbox: the box's egress policy", "remove [sandbox] network = false"}, "network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			degradedBoot(t, tc.sb, tc.net, tc.want, tc.gap)
		})
	}
}

func degradedBoot(t *testing.T, sb *protocol.SandboxSpec, network bool, want []string, gap string) {
	key := protocol.NewKey()
	man := writeSandboxManifest(t, key, sb)
	if network {
		m, _ := protocol.ParseManifest(must(os.ReadFile(man)))
		m.Network = &protocol.NetworkSpec{Default: "deny", Allow: []string{"example.test"}}
		b, _ := json.Marshal(m)
		os.WriteFile(man, b, 0o644)
	}
	var stderr bytes.Buffer
	cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0", "GLOVEBOX_MANIFEST="+man, "GLOVEBOX_ROOT="+t.TempDir(), noLandlockEnv+"=1")
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the degraded kit served; stderr:\n%s", stderr.String())
	}
	for _, w := range append(want, "allow_degraded = true", "GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1") {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
		}
	}

	// Allowed by the operator's environment, it serves.
	cmd = kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0", "GLOVEBOX_MANIFEST="+man, "GLOVEBOX_ROOT="+t.TempDir(), noLandlockEnv+"=1", "GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1")
	port, stop := startKit(t, cmd)
	defer stop()
	get := func(auth bool) protocol.Health {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/health", nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h protocol.Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || !h.OK {
			t.Fatalf("/health = %+v, %v", h, err)
		}
		return h
	}
	if h := get(false); h.Isolation != nil || h.Degraded != nil || h.Gaps != nil {
		t.Errorf("/health without the key = %+v: it tells of the sandbox", h)
	}
	if h := get(true); h.Degraded == nil || !*h.Degraded || h.Gaps[gap] == "" {
		t.Errorf("/health with the key = %+v, want degraded and a %s gap", h, gap)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestBootWithoutCapabilities: the real kit as root with every
// capability dropped (a pod's capabilities.drop: [ALL]) never panics.
// With nothing in its bounding set it serves, its sessions running as
// its own uid kept apart by Landlock and seccomp (root without
// CAP_SETUID gives no uid per session); where root cannot write a
// directory it does not own, it refuses to start and names the
// capability to keep.
func TestBootWithoutCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv to drop capabilities with")
	}
	for _, tc := range []struct {
		name, want string // want: what the refusal names; "" for a kit that serves
		prepare    func(root string)
	}{
		{"session directories", "", func(string) {}},
		{"a work directory root does not own", "CAP_DAC_OVERRIDE", func(root string) {
			os.Mkdir(filepath.Join(root, "work"), 0o755)
			os.Chown(filepath.Join(root, "work"), 12345, 12345)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := protocol.NewKey()
			root := t.TempDir()
			tc.prepare(root)
			cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0", "GLOVEBOX_MANIFEST="+writeSandboxManifest(t, key, nil), "GLOVEBOX_ROOT="+root)
			cmd.Args = append([]string{setpriv, "--bounding-set=-all", "--inh-caps=-all", "--"}, cmd.Path)
			cmd.Path = setpriv
			var stderr testkit.LogBuffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			if tc.want == "" {
				stderr.Until(t, 1, "glovebox-kit serving")
				cmd.Process.Kill()
				<-done
				if log := stderr.String(); strings.Contains(log, "panic") || !strings.Contains(log, "landlock") {
					t.Errorf("the kit without capabilities served without Landlock, or panicked:\n%s", log)
				}
				return
			}
			select {
			case err := <-done:
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
					t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
				}
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-done
				t.Fatalf("the kit without capabilities served; stderr:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "panic") {
				t.Errorf("stderr does not name %s:\n%s", tc.want, stderr.String())
			}
		})
	}
}
