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

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestS3FromEnv checks that glovebox-kit registers the s3 adapter when AWS
// credentials are in its environment, so a manifest whose outputs go to s3
// boots, and that without them boot names the missing adapter.
func TestS3FromEnv(t *testing.T) {
	key := protocol.NewKey()
	m, _ := protocol.ParseManifest([]byte(`{"name":"s3box","storage_policy":{"outputs":{"rules":[{"use":{"adapter":"s3","options":{"bucket":"out"}},"when":{"always":true}}]}}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	b, _ := json.Marshal(m)
	manifest := filepath.Join(t.TempDir(), "glovebox.json")
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0", "GLOVEBOX_MANIFEST=" + manifest}

	t.Run("without credentials", func(t *testing.T) {
		var stderr bytes.Buffer
		cmd := kitCmd(t, append(base, "GLOVEBOX_ROOT="+t.TempDir())...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1; stderr:\n%s", err, stderr.String())
		}
		if want := "Outputs policy references unregistered adapter: s3"; !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	})
	t.Run("with credentials", func(t *testing.T) {
		cmd := kitCmd(t, append(base, "GLOVEBOX_ROOT="+t.TempDir(),
			"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=eu-west-1")...)
		port, stop := startKit(t, cmd)
		defer stop()
		resp, err := http.Get("http://127.0.0.1:" + port + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("/health = %d, want 200", resp.StatusCode)
		}
	})
	t.Run("bad region", func(t *testing.T) {
		var stderr bytes.Buffer
		cmd := kitCmd(t, append(base, "GLOVEBOX_ROOT="+t.TempDir(),
			"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=not a region")...)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Fatal("kit booted with a bad region")
		}
		if want := "glovebox-kit: s3 storage: bad region"; !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	})
}
