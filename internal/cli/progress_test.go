package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// clock is a settable time for the bar.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestProgressDrawsOnlyAfterASecond(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &clock{t: time.Unix(1000, 0)}
	p := &progress{w: &out, label: "upload big.bin", total: 1 << 30, now: c.now, start: c.t}
	p.set(100 << 20)
	c.t = c.t.Add(500 * time.Millisecond)
	p.set(200 << 20)
	if out.Len() != 0 {
		t.Fatalf("drawn before a second had passed: %q", out.String())
	}
	c.t = c.t.Add(600 * time.Millisecond)
	p.set(512 << 20)
	got := out.String()
	for _, want := range []string{"\rupload big.bin [============>           ]  50%", "512.0 MB / 1.0 GB", "MB/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("bar %q lacks %q", got, want)
		}
	}
	p.set(600 << 20) // within 100ms of the last draw: not redrawn
	if out.String() != got {
		t.Errorf("redrawn within %s: %q", progressEvery, out.String())
	}
	c.t = c.t.Add(time.Second)
	p.set(1 << 30)
	p.done()
	if !strings.HasSuffix(out.String(), "100%  1.0 GB / 1.0 GB  487.6 MB/s\x1b[K\n") {
		t.Errorf("final line %q", out.String())
	}
}

func TestProgressQuickTransferPrintsNothing(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &clock{t: time.Unix(1000, 0)}
	p := &progress{w: &out, label: "x", total: 10, now: c.now, start: c.t}
	io.Copy(io.Discard, p.reader(strings.NewReader("0123456789")))
	p.done()
	if out.Len() != 0 {
		t.Errorf("a quick transfer drew %q", out.String())
	}
}

func TestProgressNotOnAPipe(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := newProgress(IO{Stderr: &out}, "x", 10)
	if p.w != nil {
		t.Fatalf("a bar on a buffer: stderr is not a terminal")
	}
	p.set(5)
	p.done()
	if out.Len() != 0 {
		t.Errorf("drew %q on a non-terminal", out.String())
	}
}
