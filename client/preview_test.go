package client_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestKitPreview mints a link to a server a real session runs, reaches
// it with the link, lists it and revokes it.
func TestKitPreview(t *testing.T) {
	url, _ := startKitWith(t, exec.New(exec.WithGrace(100*time.Millisecond)), "", func(m *protocol.Manifest) {
		m.Preview = &protocol.PreviewSpec{Domain: "preview.test", HTTP: true}
	})
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the box's answers")
	r, err := b.Prompt(ctx, `exec node -e 'require("http").createServer((q, r) => r.end("served")).listen(8000, "127.0.0.1", () => console.log("listening"))'`, client.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e := range r.Events(ctx) {
		if strings.Contains(string(e.Data), "listening") {
			break
		}
	}
	sid := b.SessionID()
	env, err := b.Environment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(env.Capabilities, " "), protocol.CapPreview) {
		t.Skipf("the box serves no previews here: capabilities %v", env.Capabilities)
	}
	p, err := b.Preview(ctx, sid, 8000, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if p.Port != 8000 || p.Session != sid || p.Link == "" || time.Until(p.Expires) > 10*time.Minute {
		t.Errorf("Preview = %+v, want a link to port 8000 of %s for 10 minutes", p, sid)
	}
	get := func() (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.Replace(url, "ws://", "http://", 1), nil)
		req.Host = p.ID + ".preview.test"
		req.Header.Set("Authorization", "Bearer "+p.Link)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(); code != http.StatusOK || body != "served" {
		t.Errorf("GET through the link = %d %q, want the session's server", code, body)
	}
	l, err := b.Previews(ctx, sid)
	if err != nil || len(l) != 1 || l[0].ID != p.ID || l[0].Link != "" {
		t.Errorf("Previews = %+v, %v, want the link without its credential", l, err)
	}
	if err := b.RevokePreview(ctx, sid, p.ID); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(); code != http.StatusGone {
		t.Errorf("GET through a revoked link = %d, want 410", code)
	}
	if err := b.RevokePreview(ctx, sid, p.ID); err == nil {
		t.Error("RevokePreview twice: no error, want 404")
	}
	if _, err := b.Preview(ctx, sid, 0, 0); err == nil {
		t.Error("Preview of port 0: no error")
	}
	r.Abort(ctx)
}
