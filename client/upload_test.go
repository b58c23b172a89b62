package client_test

import (
	"bytes"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/waittest"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestKitUploadFeedsAPrompt(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := waittest.Context(t, "the upload and the prompt")
	data := bytes.Repeat([]byte("glovebox"), 3<<17) // 3 MiB
	var calls, last atomic.Int64
	ref, err := b.Upload(ctx, "data.bin", bytes.NewReader(data), int64(len(data)), client.UploadOptions{
		Progress: func(sent, size int64) {
			calls.Add(1)
			if sent < last.Load() || size != int64(len(data)) {
				t.Errorf("progress %d of %d after %d", sent, size, last.Load())
			}
			last.Store(sent)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ref.Kind != protocol.KindServer || ref.Size != int64(len(data)) || ref.Name != "data.bin" {
		t.Fatalf("Upload = %+v, want a server ref of %d bytes", ref, len(data))
	}
	if calls.Load() == 0 || last.Load() != int64(len(data)) {
		t.Errorf("progress: %d calls, last %d; want some, ending at %d", calls.Load(), last.Load(), len(data))
	}
	r, err := b.Prompt(ctx, `sha256sum < "$GLOVEBOX_INPUT/in.bin" | cut -c1-16; wc -c < "$GLOVEBOX_INPUT/in.bin"`,
		client.PromptOptions{Inputs: map[string]protocol.FileRef{"in.bin": ref}, DiscardEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(strings.TrimSpace(done.Message), "3145728") {
		t.Errorf("the prompt saw %q, want the 3 MiB input", done.Message)
	}
	rc, err := b.File(ctx, ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("File(%s) = %d bytes, want the uploaded ones", ref.ID, len(got))
	}
}

func TestKitUploadFailures(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := waittest.Context(t, "the uploads")
	if _, err := b.Upload(ctx, "short.bin", strings.NewReader("abc"), 10, client.UploadOptions{}); err == nil || !strings.Contains(err.Error(), "short") {
		t.Errorf("Upload of a short reader = %v, want an error saying it is short", err)
	}
	if _, err := b.Upload(ctx, "a/b", strings.NewReader("abc"), 3, client.UploadOptions{}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("Upload of a name with a slash = %v, want HTTP 400", err)
	}
	ref, err := b.Upload(ctx, "again.bin", strings.NewReader("abc"), 3, client.UploadOptions{Mime: "text/plain"})
	if err != nil || ref.Mime != "text/plain" {
		t.Errorf("Upload after failures = %+v, %v; want a text/plain ref", ref, err)
	}
}
