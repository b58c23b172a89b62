package kit

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

func TestHealth(t *testing.T) {
	b := newBox(t, scripted(nil))
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/health", 200},
		{"GET", "/health?probe=1", 200},
		{"HEAD", "/health", 200},
		{"GET", "/health/live", 200},
		{"POST", "/health/live", 405},
		{"POST", "/health", 405},
		{"DELETE", "/health", 405},
		{"GET", "/nope", 404},
	} {
		req, _ := http.NewRequest(tc.method, b.url+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
		if tc.want == 200 && tc.method == "GET" && (body["ok"] != true || body["name"] != "t" || body["version"] != "0.1.0") {
			t.Errorf("%s %s body = %v", tc.method, tc.path, body)
		}
	}
}

func TestEnvironment(t *testing.T) {
	b := newBox(t, scripted(nil))
	resp, body := b.get("/environment", b.auth())
	if resp.StatusCode != 200 {
		t.Fatalf("GET /environment = %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Cache-Control"); got != "private, no-store" {
		t.Errorf("Cache-Control = %q", got)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if env["name"] != "t" || env["protocol_version"] != 1.0 {
		t.Errorf("environment = %s", body)
	}
	caps, _ := env["capabilities"].([]any)
	if !strings.Contains(string(body), `"resume"`) || len(caps) == 0 {
		t.Errorf("capabilities = %v", caps)
	}
	fs, _ := env["fs"].(map[string]any)
	if w, _ := fs["work"].(map[string]any); w["path"] != "/work" {
		t.Errorf("fs.work = %v, want the manifest's /work", fs["work"])
	}
}

func TestAuth(t *testing.T) {
	b := newBox(t, scripted(nil))
	wrongSameLen := strings.Repeat("A", len(b.key))
	for _, tc := range []struct {
		name   string
		header http.Header
		ok     bool
	}{
		{"missing", nil, false},
		{"wrong key", http.Header{"Authorization": {"Bearer nope"}}, false},
		{"wrong key of the right length", http.Header{"Authorization": {"Bearer " + wrongSameLen}}, false},
		{"key prefix", http.Header{"Authorization": {"Bearer " + b.key[:10]}}, false},
		{"key with extra", http.Header{"Authorization": {"Bearer " + b.key + "x"}}, false},
		{"lower-case bearer", http.Header{"Authorization": {"bearer " + b.key}}, false},
		{"basic", http.Header{"Authorization": {"Basic " + b.key}}, false},
		{"bearer", http.Header{"Authorization": {"Bearer " + b.key}}, true},
		{"bearer with spaces", http.Header{"Authorization": {"Bearer   " + b.key + "  "}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/environment", "/files/abc"} {
				resp, body := b.get(path, tc.header)
				if tc.ok && resp.StatusCode == 401 || !tc.ok && (resp.StatusCode != 401 || len(body) != 0) {
					t.Errorf("GET %s = %d %q, ok want %v", path, resp.StatusCode, body, tc.ok)
				}
			}
			h := http.Header{}
			for k, v := range tc.header {
				h[k] = v
			}
			c, resp, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+"/run", wsconn.DialOptions{Header: h})
			if tc.ok {
				if err != nil {
					t.Fatalf("upgrade with %v: %v", tc.header, err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("upgrade with %v succeeded", tc.header)
			}
			if resp == nil || resp.StatusCode != 401 {
				t.Errorf("upgrade with %v: %v, want 401", tc.header, err)
			}
		})
	}

	t.Run("subprotocol bearer", func(t *testing.T) {
		c, resp, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+"/",
			wsconn.DialOptions{Subprotocols: []string{"glovebox.v1", "bearer." + b.key}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "glovebox.v1" {
			t.Errorf("selected subprotocol = %q, want glovebox.v1", got)
		}
		c2, resp, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws"+strings.TrimPrefix(b.url, "http")+"/",
			wsconn.DialOptions{Subprotocols: []string{"glovebox.v1", "bearer.wrong"}})
		if err == nil {
			c2.Close()
			t.Fatal("wrong subprotocol bearer accepted")
		}
		if resp == nil || resp.StatusCode != 401 {
			t.Errorf("wrong subprotocol bearer: %v, want 401", err)
		}
	})
}
