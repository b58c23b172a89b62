package client_test

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestKitUploadFeedsAPrompt(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "the upload and the prompt")
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
	ctx := testkit.Context(t, "the uploads")
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

// cutter is a TCP proxy to the box that cuts the first cuts connections
// once they have carried more than limit bytes towards the box.
type cutter struct {
	ln    net.Listener
	to    string
	limit int64
	cuts  atomic.Int32
	max   int32
}

func startCutter(t *testing.T, to string, limit int64, max int32) *cutter {
	c := &cutter{to: to, limit: limit, max: max}
	c.ln = testkit.Proxy(t, to, func(down, up net.Conn) {
		var n int64
		buf := make([]byte, 32<<10)
		for {
			m, err := down.Read(buf)
			if m > 0 {
				n += int64(m)
				if n > c.limit && c.cuts.Load() < c.max {
					c.cuts.Add(1)
					up.Write(buf[:m/2])
					return // cut both ways, mid-body
				}
				if _, err := up.Write(buf[:m]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	return c
}

func TestKitUploadAtResumesThroughCuts(t *testing.T) {
	wsURL, _ := startKit(t, exec.New(), "")
	hostport := strings.TrimSuffix(strings.TrimPrefix(wsURL, "ws://"), "/")
	cut := startCutter(t, hostport, 1<<20, 2)
	b := kitBox(t, "ws://"+cut.ln.Addr().String()+"/")
	ctx := testkit.Context(t, "the resumed upload")
	data := bytes.Repeat([]byte("resume me "), 500000) // 5,000,000 bytes
	var last atomic.Int64
	ref, err := b.UploadAt(ctx, "cut.bin", bytes.NewReader(data), int64(len(data)), client.UploadOptions{
		Progress: func(sent, size int64) { last.Store(sent) },
	})
	if err != nil {
		t.Fatalf("UploadAt through a proxy that cuts twice: %v", err)
	}
	if cut.cuts.Load() != 2 {
		t.Errorf("the proxy cut %d times, want 2", cut.cuts.Load())
	}
	if ref.Size != int64(len(data)) || last.Load() != int64(len(data)) {
		t.Errorf("ref size %d, last progress %d; want %d", ref.Size, last.Load(), len(data))
	}
	rc, err := b.File(ctx, ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("the stored file differs from what was sent (%d bytes, want %d)", len(got), len(data))
	}
}
