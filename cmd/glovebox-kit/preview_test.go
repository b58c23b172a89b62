package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestPreviewPrivsep runs the kit as root, privilege-separated, with the
// full sandbox (each session in a network namespace of its own) and with
// sessions on the host's loopback (network off, Landlock on): a server in
// a session, running as the session's uid, answers through its preview
// link; the unprivileged front reaches it.
func TestPreviewPrivsep(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, as the kit runs in its image")
	}
	for _, tc := range []struct {
		name string
		sb   *protocol.SandboxSpec
		port string // the port the server listens on, as the shell reads it
	}{
		{"netns", nil, "8000"},
		{"port", &protocol.SandboxSpec{Network: off()}, `"$PORT"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := protocol.NewKey()
			m, _ := protocol.ParseManifest([]byte(`{"name":"preview","agent":{"type":"exec"}}`))
			m.KeyFingerprint = protocol.Fingerprint(key)
			m.Sandbox = tc.sb
			m.Preview = &protocol.PreviewSpec{Domain: "preview.test", HTTP: true}
			b, _ := json.Marshal(m)
			man := filepath.Join(t.TempDir(), "glovebox.json")
			os.WriteFile(man, b, 0o644)
			root, err := os.MkdirTemp("/var/tmp", "preview-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			os.Chmod(root, 0o755)
			cmd := exec.Command(os.Args[0], "--manifest", man, "--root", root)
			cmd.Env = []string{"GLOVEBOX_KIT_AS_MAIN=1", "PATH=/usr/local/bin:/usr/bin:/bin", "GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0"}
			port, stop := startKit(t, cmd)
			t.Cleanup(stop)
			h := &hostile{t: t, key: key, port: port, pid: cmd.Process.Pid, root: root}
			if iso := h.isolation(); iso.Front == "" {
				t.Fatalf("the kit is not privilege-separated: %+v", iso)
			}
			c, sid := h.dial("")
			srv := `exec node -e 'require("http").createServer((q, r) => r.end("uid " + process.getuid())).listen(+process.argv[1], "127.0.0.1", () => console.log("listening"))' ` + tc.port
			b, _ = json.Marshal(map[string]any{"type": "prompt", "id": "srv", "text": srv, "inputs": map[string]any{}})
			if err := c.WriteText(b); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			for {
				data, err := c.ReadMessage()
				if err != nil {
					t.Fatalf("waiting for the server: %v", err)
				}
				if s := string(data); strings.Contains(s, `"complete"`) || strings.Contains(s, `"error"`) {
					t.Fatalf("the server ended: %s", s)
				} else if strings.Contains(s, "listening") {
					break
				}
			}
			// The session's port: $PORT, as the session sees it.
			listen := 8000
			if tc.name == "port" {
				listen = 0
			}
			p := mintPreview(t, h, sid, listen)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+"/", nil)
			req.Host = p.ID + ".preview.test"
			req.Header.Set("Authorization", "Bearer "+p.Link)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			uid, _ := strconv.Atoi(strings.TrimPrefix(string(body), "uid "))
			if resp.StatusCode != http.StatusOK || uid < 200000 {
				t.Errorf("GET %s through the preview = %d %q, want the session's server, as a session uid", p.URL, resp.StatusCode, body)
			}
		})
	}
}

// mintPreview asks for a link to port in session sid; port 0 takes the
// port the box answers a wrong one with (mode "port" names the session's).
func mintPreview(t *testing.T, h *hostile, sid string, port int) protocol.Preview {
	t.Helper()
	post := func(port int) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+h.port+"/sessions/"+sid+"/previews", strings.NewReader(fmt.Sprintf(`{"port":%d}`, port)))
		req.Header.Set("Authorization", "Bearer "+h.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if port == 0 {
		resp, b := post(1)
		_, rest, ok := strings.Cut(string(b), "this one's is ")
		if resp.StatusCode != http.StatusBadRequest || !ok {
			t.Fatalf("POST for port 1 = %d %s, want 400 naming the session's port", resp.StatusCode, b)
		}
		port, _ = strconv.Atoi(strings.Fields(rest)[0])
	}
	resp, b := post(port)
	var p protocol.Preview
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &p) != nil {
		t.Fatalf("POST previews = %d %s, want 201", resp.StatusCode, b)
	}
	return p
}
