package sessionbench

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestFloor(t *testing.T) {
	d, err := Floor()
	if err != nil || d <= 0 {
		t.Fatalf("Floor() = %v, %v; want a duration", d, err)
	}
}

// TestFirstEvent times a session on a real kit over loopback, and sees a
// wrong key refused.
func TestFirstEvent(t *testing.T) {
	const key = "bench-key"
	m, err := protocol.ParseManifest([]byte(`{"name":"bench","version":"0.1.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	m.KeyFingerprint = protocol.Fingerprint(key)
	srv, err := kit.New(kit.Options{
		Manifest: m, Key: key, Root: t.TempDir(), Agent: exec.New(),
		Logger: testkit.Logger(t, slog.LevelWarn),
		Getenv: func(string) string { return "" },
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		srv.Close(context.Background())
	})
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/"
	d, err := FirstEvent(t.Context(), url, key)
	if err != nil || d <= 0 {
		t.Fatalf("FirstEvent = %v, %v; want a duration", d, err)
	}
	if _, err := FirstEvent(t.Context(), url, "wrong-key"); err == nil {
		t.Error("FirstEvent with a wrong key = nil error, want one")
	}
}
