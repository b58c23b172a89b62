package kit

import (
	"context"
	"errors"
	"io"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// setBudgets applies the manifest's connection cap and frame budget (their
// syntax was checked by the manifest's Check).
func (s *Server) setBudgets(l protocol.Limits) {
	s.maxConns = l.MaxConnections
	if s.maxConns <= 0 {
		s.maxConns = defaultMaxConns(s.maxSessions)
	}
	s.frameBudget = 2 * s.maxMessage
	if l.FrameBudget != "" {
		if n, err := protocol.ParseSize(l.FrameBudget); err == nil {
			s.frameBudget = n
		}
	}
	// A budget below one whole frame would refuse frames the box allows.
	s.frameBudget = max(s.frameBudget, s.maxMessage+frameChunk)
	s.frames = semaphore.NewWeighted(s.frameBudget)
}

// inlineBudget is how many bytes a prompt's inline outputs may take in its
// complete frame: half of limits.max_message, the rest left for the
// message and the frame's other fields. Past it, outputs take the next
// outputs rule.
func (s *Server) inlineBudget() int64 { return s.maxMessage / 2 }

// frameChunk is the first piece of a frame being read; most frames fit.
const frameChunk = 64 << 10

// errBudget ends a connection whose frame waited too long for memory.
var errBudget = errors.New("kit: the box is short of memory for incoming frames (limits.frame_budget)")

// readFrame reads the next message from c into memory taken from the
// kit-wide frame budget, a piece at a time: a frame over limits.max_message
// was refused from its header already, and a large one waits for budget
// (its sender meanwhile held back by TCP) for up to wait instead of
// allocating. release gives the memory back once the frame was handled.
func (s *Server) readFrame(c *wsconn.Conn, wait time.Duration) (data []byte, release func(), err error) {
	r, err := c.NextReader()
	if err != nil {
		return nil, nil, err
	}
	var held int64
	release = func() {
		if held > 0 {
			s.frames.Release(held)
			held = 0
		}
	}
	take := func(n int64) error {
		if s.frames.TryAcquire(n) {
			held += n
			return nil
		}
		ctx, cancel := context.WithTimeoutCause(s.ctx, wait, errBudget)
		defer cancel()
		if err := s.frames.Acquire(ctx, n); err != nil {
			return context.Cause(ctx)
		}
		held += n
		c.SetReadDeadline(time.Now().Add(wait)) // the wait was not the peer's
		return nil
	}
	// The first piece is small; later ones grow with what was read so far,
	// so that a frame of n bytes takes O(log n) pieces and at most twice
	// its size of budget.
	var pieces [][]byte
	size := int64(frameChunk)
	for {
		if err := take(size); err != nil {
			release()
			return nil, nil, err
		}
		buf := make([]byte, size)
		n, rerr := io.ReadFull(r, buf)
		pieces = append(pieces, buf[:n])
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			release()
			return nil, nil, rerr
		}
		size = min(held, s.maxMessage+1-held)
		if size <= 0 {
			size = 1 // the read limit fails the frame on its next header
		}
	}
	if len(pieces) == 1 {
		return pieces[0], release, nil
	}
	total := 0
	for _, p := range pieces {
		total += len(p)
	}
	// Joined, the pieces are garbage; the budget that counted them stands
	// for the copy (held >= total) until the frame is handled.
	data = make([]byte, 0, total)
	for _, p := range pieces {
		data = append(data, p...)
	}
	return data, release, nil
}
