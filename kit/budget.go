package kit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// budgets bound the memory all sessions hold at once: the frames being
// read (limits.frame_budget), the replay buffers kept for resume, and
// the frames kept for the inspector.
type budgets struct {
	maxMessage  int64
	frameBudget int64
	frames      *semaphore.Weighted
	replayBytes atomic.Int64 // all sessions' replay buffers
	replayCap   int64        // their bound; 0: replayTotal
	observed    atomic.Int64 // every session's observer history, while the inspector is on (observe.go)
}

// newBudgets applies the manifest's frame budget (its syntax was checked
// by the manifest's Check) for frames of at most maxMessage bytes.
func newBudgets(l protocol.Limits, maxMessage int64) *budgets {
	b := &budgets{maxMessage: maxMessage, frameBudget: 2 * maxMessage}
	if l.FrameBudget != "" {
		if n, err := protocol.ParseSize(l.FrameBudget); err == nil {
			b.frameBudget = n
		}
	}
	// A budget below one whole frame would refuse frames the box allows.
	b.frameBudget = max(b.frameBudget, maxMessage)
	b.frames = semaphore.NewWeighted(b.frameBudget)
	return b
}

// inlineBudget is how many bytes a prompt's inline outputs may take in its
// complete frame: half of limits.max_message, the rest left for the
// message and the frame's other fields. Past it, outputs take the next
// outputs rule.
func (b *budgets) inlineBudget() int64 { return b.maxMessage / 2 }

// frameChunk is the first piece of a frame being read, outside the frame
// budget (each connection reads one frame at a time); most frames fit.
const frameChunk = 64 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, frameChunk); return &b }}

// framePiece is the size of the pieces the rest of a larger frame is read
// into. They are pooled: frames read one after the other reuse them.
const framePiece = 1 << 20

var piecePool = sync.Pool{New: func() any { b := make([]byte, framePiece); return &b }}

// errBudget ends a connection whose frame waited too long for memory.
var errBudget = errors.New("kit: the box is short of memory for incoming frames (limits.frame_budget)")

// readFrame reads the next message from c; ctx ends a wait for the
// budget. A message over limits.max_message is refused (CloseTooBig) as
// soon as a frame's header brings its size past it, whether from one
// frame or from the fragments so far. The first frameChunk bytes are read
// into a piece of their own, which is all most messages need; a larger
// message first takes a slot of max_message bytes from the kit-wide
// frame budget (limits.frame_budget), waiting for one, its sender
// meanwhile held back by TCP, for up to wait instead of allocating. A
// slot is taken whole, so that messages never wait for each other while
// holding part of the budget. The rest is read into pooled pieces of
// framePiece bytes, not a buffer that doubles as it fills: a message
// costs its own bytes while read, and a refused one leaves no garbage
// behind for the next to add to before the collector runs; the message
// is then copied out at its size. release gives the slot back once the
// message was handled.
func (b *budgets) readFrame(ctx context.Context, c *wsconn.Conn, wait time.Duration) (data []byte, release func(), err error) {
	r, err := c.NextReader()
	if err != nil {
		return nil, nil, err
	}
	// The first piece is read into a pooled chunk and copied out at its
	// size: a small frame costs its own bytes, not 64 KiB.
	chunk := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(chunk)
	first := *chunk
	n, err := io.ReadFull(r, first)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return bytes.Clone(first[:n]), func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	slot := b.maxMessage
	if !b.frames.TryAcquire(slot) {
		ctx, cancel := context.WithTimeoutCause(ctx, wait, errBudget)
		err := b.frames.Acquire(ctx, slot)
		cancel()
		if err != nil {
			return nil, nil, context.Cause(ctx)
		}
		c.SetReadDeadline(time.Now().Add(wait)) // the wait was not the peer's
	}
	var once sync.Once
	release = func() { once.Do(func() { b.frames.Release(slot) }) }
	data, err = readPieces(r, first)
	if err != nil {
		release()
		return nil, nil, err
	}
	return data, release, nil
}

// readPieces reads r to its end into pooled pieces and returns what it
// read after head, copied out at its size.
func readPieces(r io.Reader, head []byte) ([]byte, error) {
	var pieces []*[]byte
	defer func() {
		for _, p := range pieces {
			piecePool.Put(p)
		}
	}()
	total := len(head)
	for {
		p := piecePool.Get().(*[]byte)
		pieces = append(pieces, p)
		n, err := io.ReadFull(r, *p)
		total += n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	data := make([]byte, total)
	off := copy(data, head)
	for _, p := range pieces {
		off += copy(data[off:], *p)
	}
	return data, nil
}
