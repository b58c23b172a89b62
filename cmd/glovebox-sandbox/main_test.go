package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// maxSize is the budget of the supervisor binary as the images ship it
// (stripped, -trimpath, CGO off): about 3 MB today, against the kit's 13.
// Every session and the boot probe start it, so what it links is paid for
// in start time and memory per session; the dependency test keeps its
// imports to the standard library, x/sys and kit/sandbox.
const maxSize = 4 << 20

// TestSize builds glovebox-sandbox as nix/go.nix does, for the images'
// platforms, and checks it stays small.
func TestSize(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "glovebox-sandbox")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build (within 5m): %v\n%s", err, b)
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() > maxSize {
				t.Errorf("glovebox-sandbox for linux/%s is %d bytes, over its budget of %d: look at what it links (go list -deps ./cmd/glovebox-sandbox)", arch, st.Size(), maxSize)
			}
		})
	}
}
