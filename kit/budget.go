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
// frame or from the fragments so far. A message larger than frameChunk
// first takes a slot of max_message bytes from the kit-wide frame budget
// (limits.frame_budget), waiting for one, its sender meanwhile held back
// by TCP, for up to wait instead of allocating. A slot is taken whole, so
// that messages never wait for each other while holding part of the
// budget. A message of one frame whose header is at hand is read into a
// buffer of its size. Any other is read first into a pooled chunk of
// frameChunk bytes, which is all most messages need, then into pooled
// pieces of framePiece bytes, not a buffer that doubles as it fills: a
// message costs its own bytes while read, a refused one leaves no
// garbage behind for the next to add to before the collector runs, and
// the message is then copied out at its size. release gives the slot
// back once the message was handled.
func (b *budgets) readFrame(ctx context.Context, c *wsconn.Conn, wait time.Duration) (data []byte, release func(), err error) {
	r, size, err := c.NextReaderSize()
	if err != nil {
		return nil, nil, err
	}
	if size > frameChunk && size <= b.maxMessage {
		if release, err = b.acquire(ctx, c, wait); err != nil {
			return nil, nil, err
		}
		if data, err = readSized(r, size); err != nil {
			release()
			return nil, nil, err
		}
		return data, release, nil
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
	if release, err = b.acquire(ctx, c, wait); err != nil {
		return nil, nil, err
	}
	if data, err = readPieces(r, first); err != nil {
		release()
		return nil, nil, err
	}
	return data, release, nil
}

// acquire takes a slot of max_message bytes from the frame budget for a
// message of c, waiting for up to wait, and returns its release.
func (b *budgets) acquire(ctx context.Context, c *wsconn.Conn, wait time.Duration) (release func(), err error) {
	slot := b.maxMessage
	if !b.frames.TryAcquire(slot) {
		ctx, cancel := context.WithTimeoutCause(ctx, wait, errBudget)
		err := b.frames.Acquire(ctx, slot)
		cancel()
		if err != nil {
			return nil, context.Cause(ctx)
		}
		c.SetReadDeadline(time.Now().Add(wait)) // the wait was not the peer's
	}
	var once sync.Once
	return func() { once.Do(func() { b.frames.Release(slot) }) }, nil
}

// readSized reads a message whose header gave its size into a buffer of
// that size. Should it go on past it, the rest is read in pieces.
func readSized(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size)
	n, err := io.ReadFull(r, data)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return data[:n], nil
	}
	if err != nil {
		return nil, err
	}
	var more [1]byte
	if _, err := io.ReadFull(r, more[:]); err == io.EOF {
		return data, nil
	} else if err != nil {
		return nil, err
	}
	return readPieces(io.MultiReader(bytes.NewReader(more[:]), r), data)
}

// readPieces reads r to its end into pooled pieces and returns head and
// what followed it, copied out at their size.
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
