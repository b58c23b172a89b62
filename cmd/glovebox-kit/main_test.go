package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The test binary doubles as glovebox-kit when this variable is set, so
// the tests run the real command in a real process. As the images install
// the kit, glovebox-sandbox is built beside it first: the kit's sessions
// (and the attacks on them) run under the real supervisor binary.
func TestMain(m *testing.M) {
	sandbox.MaybeSupervise() // the test binary serves as its sessions' supervisor
	if os.Getenv("GLOVEBOX_KIT_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	remove, err := installSupervisor()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testkit.Main(m, testkit.After(remove))
}

func kitCmd(t *testing.T, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{"GLOVEBOX_KIT_AS_MAIN=1", "PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}

func writeManifest(t *testing.T, key, agent string) string {
	m, _ := protocol.ParseManifest([]byte(`{"name":"cmd","agent":{"type":"` + agent + `"}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	b, _ := json.Marshal(m)
	p := filepath.Join(t.TempDir(), "glovebox.json")
	os.WriteFile(p, b, 0o644)
	return p
}

// writeStorageManifest writes an exec box's manifest whose outputs always
// go to the adapter named.
func writeStorageManifest(t *testing.T, key, adapter string) string {
	m, _ := protocol.ParseManifest([]byte(`{"name":"cmd"}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	m.StoragePolicy.Outputs = protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: adapter, Options: map[string]any{"bucket": "b"}}, When: protocol.When{Always: true}}}}
	b, _ := json.Marshal(m)
	p := filepath.Join(t.TempDir(), "glovebox.json")
	os.WriteFile(p, b, 0o644)
	return p
}

func TestBootFailures(t *testing.T) {
	key := protocol.NewKey()
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"no manifest, no key", []string{"GLOVEBOX_MANIFEST=/nonexistent/glovebox.json"},
			[]string{"glovebox-kit: manifest /nonexistent/glovebox.json: no such file or directory", "glovebox-kit: GLOVEBOX_KEY is not set"}},
		{"go agent", []string{"GLOVEBOX_MANIFEST=" + writeManifest(t, key, "go"), "GLOVEBOX_KEY=" + key, "GLOVEBOX_ROOT=" + t.TempDir()},
			[]string{`glovebox-kit: agent: type "go": glovebox-kit serves exec and acp agents; a Go agent is built with its own main`}},
		{"bad port and key", []string{"GLOVEBOX_MANIFEST=" + writeManifest(t, key, "exec"), "GLOVEBOX_KEY=wrong", "GLOVEBOX_PORT=http", "GLOVEBOX_ROOT=" + t.TempDir()},
			[]string{`glovebox-kit: GLOVEBOX_PORT "http" is not a port number`, "glovebox-kit: GLOVEBOX_KEY does not match"}},
		{"s3 without credentials", []string{"GLOVEBOX_MANIFEST=" + writeStorageManifest(t, key, "s3"), "GLOVEBOX_KEY=" + key, "GLOVEBOX_ROOT=" + t.TempDir()},
			[]string{"glovebox-kit: storage: the policy uses s3, but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set"}},
		{"s3 without the secret", []string{"GLOVEBOX_MANIFEST=" + writeStorageManifest(t, key, "s3"), "GLOVEBOX_KEY=" + key, "GLOVEBOX_ROOT=" + t.TempDir(), "AWS_ACCESS_KEY_ID=AKIAEXAMPLE"},
			[]string{"glovebox-kit: storage: the policy uses s3, but AWS_SECRET_ACCESS_KEY is not set"}},
		{"gcs", []string{"GLOVEBOX_MANIFEST=" + writeStorageManifest(t, key, "gcs"), "GLOVEBOX_KEY=" + key, "GLOVEBOX_ROOT=" + t.TempDir()},
			[]string{`glovebox-kit: storage: the policy uses "gcs", which this kit does not implement: use s3`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := kitCmd(t, tc.env...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// TestServeExec runs glovebox-kit with the exec agent, prompts it over a
// real socket and stops it with SIGTERM.
func TestServeExec(t *testing.T) {
	key := protocol.NewKey()
	root := t.TempDir()
	cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0")
	cmd.Args = append(cmd.Args, "--manifest", writeManifest(t, key, "exec"), "--root", root)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
	sc := bufio.NewScanner(stderr)
	port := ""
	for port == "" && sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			port = m[1]
		}
	}
	if port == "" {
		t.Fatal("no listen address logged")
	}
	go func() {
		for sc.Scan() {
			t.Log(sc.Text())
		}
	}()

	resp, err := http.Get("http://127.0.0.1:" + port + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()

	c, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+port+"/run", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	c.WriteText([]byte(`{"type":"prompt","id":"req_1","text":"echo hello; echo x > \"$GLOVEBOX_OUTPUT/x.txt\"","inputs":{}}`))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var done map[string]any
	for done == nil {
		b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		if m["type"] == "complete" || m["type"] == "error" {
			done = m
		}
	}
	if done["type"] != "complete" || !strings.Contains(done["message"].(string), "hello") {
		t.Fatalf("final frame = %v", done)
	}
	if outs := done["outputs"].(map[string]any); outs["x.txt"] == nil {
		t.Errorf("outputs = %v", outs)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	// The kit says it drains, then, with nothing running, goodbye with a
	// close frame 1001.
	b, err := c.ReadMessage()
	if err == nil && !strings.Contains(string(b), `"type":"draining"`) {
		t.Errorf("after SIGTERM: %s, want a draining frame", b)
	}
	if err == nil {
		_, err = c.ReadMessage()
	}
	if code := wsconn.CloseCode(err); code != wsconn.CloseGoingAway {
		t.Errorf("after SIGTERM: %v, want close 1001", err)
	}
	if err := testkit.Exit(t, cmd, "the kit after SIGTERM"); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// TestExitStatus: kit.Main's status is the process's: 0 for --version and
// --help, 1 for a bad command line, reported on stderr.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   int
		stdout string
		stderr string
	}{
		{[]string{"--version"}, 0, "glovebox-kit ", ""},
		{[]string{"--help"}, 0, "", "Usage of glovebox-kit"},
		{[]string{"--frobnicate"}, 1, "", "flag provided but not defined: -frobnicate"},
		{[]string{"sh"}, 1, "", `glovebox-kit: unexpected argument "sh"`},
	} {
		var stdout, stderr bytes.Buffer
		cmd := kitCmd(t)
		cmd.Args = append(cmd.Args, tc.args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		status := 0
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.want || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("glovebox-kit %s = status %d, stdout %q, stderr %q; want %d, %q and %q", strings.Join(tc.args, " "), status, stdout.String(), stderr.String(), tc.want, tc.stdout, tc.stderr)
		}
	}
}
