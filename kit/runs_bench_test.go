package kit

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// BenchmarkRunRecord measures what recording costs a prompt: the draft
// (ended, on the prompt's runner), digest bookkeeping for one input and
// one output, and the sealing goroutine's work until the record is kept
// (sign, append to the session's file). The files' bytes are digested as the kit reads them
// anyway; their hashing is in the figure as a 1 KiB read each.
func BenchmarkRunRecord(b *testing.B) {
	srv, _, _ := benchBox(b, agent.Func(func(context.Context, agent.Turn) (string, error) { return "", nil }))
	ss := srv.newSession()
	ss.owner = identityKey
	rr := &srv.runs
	data := bytes.Repeat([]byte("x"), 1024)
	for i := 0; b.Loop(); i++ {
		p := &promptRun{msg: &protocol.Prompt{ID: "p" + strconv.Itoa(i), Text: "summarise in.pdf"}, started: time.Now()}
		for _, kind := range []string{"inputs", "outputs"} {
			h := newHashReader(bytes.NewReader(data))
			io.Copy(io.Discard, h)
			rr.noteFile(ss, kind, "f.txt", h)
		}
		rr.ended(ss, p, "complete")
		rr.sealQueued(srv)
		rr.mu.Lock()
		c := rr.chains[ss.id]
		done := c.pending[len(c.pending)-1].done
		rr.mu.Unlock()
		<-done
	}
}
