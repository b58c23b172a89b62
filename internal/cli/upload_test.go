package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPromptUploadsBigInputs sends a file over uploadAbove to a box whose
// frames are capped at 1 MB: only the upload route can carry it.
func TestPromptUploadsBigInputs(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t","limits":{"max_message":"1MB"}}`)
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), (uploadAbove+1<<20)/16)
	os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644)
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte("small"), 0o644)
	stdout, stderr, err := runGbx(t, nil, dir, "prompt", "--url", url, "--key", key, "-f", "big.bin", "-f", "small.txt",
		`wc -c < "$GLOVEBOX_INPUT/big.bin"; cat "$GLOVEBOX_INPUT/small.txt"`)
	if err != nil {
		t.Fatalf("gbx prompt with a big input: %v\n%s", err, stderr)
	}
	if want := strconv.Itoa(len(big)) + "\nsmall"; strings.TrimSpace(stdout) != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if strings.Contains(stderr, "upload") {
		t.Errorf("a progress bar on a non-terminal stderr: %q", stderr)
	}
}
