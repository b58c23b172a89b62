package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress bars for transfers: drawn on stderr, only when it is a
// terminal, and only once a transfer has taken longer than progressAfter
// (a quick one prints nothing).
const (
	progressAfter = time.Second
	progressEvery = 100 * time.Millisecond
	progressWidth = 24
)

// progress draws one transfer's bar. Its methods are safe to call from
// the transferring goroutine while another prints.
type progress struct {
	w     io.Writer // nil: draw nothing
	label string
	total int64
	now   func() time.Time

	mu    sync.Mutex
	start time.Time
	drawn time.Time
	shown bool
	n     int64
}

// newProgress returns a bar for a transfer of total bytes (0: unknown),
// drawn on stdio.Stderr when that is a terminal.
func newProgress(stdio IO, label string, total int64) *progress {
	p := &progress{label: label, total: total, now: time.Now}
	if isTerminalWriter(stdio.Stderr) {
		p.w = stdio.Stderr
	}
	p.start = p.now()
	return p
}

func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// set records that n bytes have moved and redraws when it is time.
func (p *progress) set(n int64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	now := p.now()
	if now.Sub(p.start) < progressAfter || now.Sub(p.drawn) < progressEvery {
		return
	}
	p.drawn = now
	p.shown = true
	fmt.Fprintf(p.w, "\r%s\x1b[K", p.line(now))
}

// done ends the bar's line, if one was drawn.
func (p *progress) done() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", p.line(p.now()))
		p.shown = false
	}
}

// line renders "LABEL [=====>     ]  45%  450.0 MB / 1.0 GB  120.0 MB/s".
func (p *progress) line(now time.Time) string {
	rate := ""
	if secs := now.Sub(p.start).Seconds(); secs > 0 {
		rate = humanSize(int64(float64(p.n)/secs)) + "/s"
	}
	if p.total <= 0 {
		return fmt.Sprintf("%s  %s  %s", p.label, humanSize(p.n), rate)
	}
	frac := float64(p.n) / float64(p.total)
	frac = max(0, min(frac, 1))
	fill := int(frac * progressWidth)
	bar := strings.Repeat("=", fill)
	if fill < progressWidth {
		bar += ">" + strings.Repeat(" ", progressWidth-fill-1)
	}
	return fmt.Sprintf("%s [%s] %3.0f%%  %s / %s  %s", p.label, bar, frac*100, humanSize(p.n), humanSize(p.total), rate)
}

// reader counts what is read through it.
func (p *progress) reader(r io.Reader) io.Reader {
	if p == nil || p.w == nil {
		return r
	}
	return &progressReader{r: r, p: p}
}

type progressReader struct {
	r io.Reader
	p *progress
	n int64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.n += int64(n)
	pr.p.set(pr.n)
	return n, err
}
