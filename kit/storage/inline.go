package storage

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/glovebox-dev/glovebox/protocol"
)

// DefaultInlineMax is the largest file the inline adapter stores unless
// told otherwise. An inline ref travels base64-encoded inside one WebSocket
// frame, so it is held in memory whole (a third larger) on both sides.
const DefaultInlineMax int64 = 32 << 20

// Inline stores a file as base64 bytes in the ref itself. It is the only
// built-in adapter that holds a whole file in memory, and refuses files
// larger than its maximum.
type Inline struct {
	max int64
}

var _ Adapter = (*Inline)(nil)

// NewInline returns an inline adapter that stores files of at most max
// bytes (DefaultInlineMax when max <= 0).
func NewInline(max int64) *Inline {
	if max <= 0 {
		max = DefaultInlineMax
	}
	return &Inline{max: max}
}

// Put reads exactly meta.Size bytes from r into an inline ref named
// meta.Name, with meta.Mime or, when empty, the type guessed from the name.
// A file larger than the adapter's maximum, or a reader that yields more or
// fewer than meta.Size bytes, is an error.
func (a *Inline) Put(ctx context.Context, meta Meta, r io.Reader) (protocol.FileRef, error) {
	if meta.Size < 0 {
		return protocol.FileRef{}, fmt.Errorf("inline %s: negative size %d", meta.Name, meta.Size)
	}
	if meta.Size > a.max {
		return protocol.FileRef{}, fmt.Errorf("inline %s: %d bytes is over the inline limit of %d: %w", meta.Name, meta.Size, a.max, ErrTooLarge)
	}
	if err := ctx.Err(); err != nil {
		return protocol.FileRef{}, err
	}
	buf := make([]byte, meta.Size)
	if err := readExactly(r, buf); err != nil {
		return protocol.FileRef{}, fmt.Errorf("inline %s: %w", meta.Name, err)
	}
	mime := meta.Mime
	if mime == "" {
		mime = protocol.GuessMime(meta.Name)
	}
	return protocol.InlineRef(meta.Name, mime, buf), nil
}

// Open returns a reader of an inline ref's data decoded (standard or
// URL-safe base64, padded or not, white space ignored, as v1 accepts), a
// block at a time, so that a large file is never in memory twice. Data
// that is not base64 is an error here, before anything is read; data
// that decodes to more than max bytes (max > 0) is ErrTooLarge, detected
// without decoding.
func (a *Inline) Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error) {
	if ref.Kind != protocol.KindInline {
		return nil, fmt.Errorf("inline adapter cannot read a %s ref (file %q)", ref.Kind, ref.Name)
	}
	if max > 0 && decodedLen(ref.Data) > max {
		return nil, fmt.Errorf("inline file %q: over %d bytes: %w", ref.Name, max, ErrTooLarge)
	}
	if _, err := io.Copy(io.Discard, protocol.NewBase64Reader(ref.Data)); err != nil {
		return nil, fmt.Errorf("inline file %q: data is not base64: %w", ref.Name, err)
	}
	return io.NopCloser(protocol.NewBase64Reader(ref.Data)), nil
}

// decodedLen is the length protocol.DecodeBase64 would return for valid
// data, computed without decoding: white space is ignored, trailing "="
// padding is dropped, and every 4 remaining characters make 3 bytes.
func decodedLen(s string) int64 {
	end := len(s)
	for end > 0 && (s[end-1] == '=' || isBase64Space(s[end-1])) {
		end--
	}
	var n int64
	for i := 0; i < end; i++ {
		if !isBase64Space(s[i]) {
			n++
		}
	}
	return n * 3 / 4
}

func isBase64Space(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// readExactly fills buf from r and then checks that r has nothing more.
func readExactly(r io.Reader, buf []byte) error {
	n, err := io.ReadFull(r, buf)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("short content: got %d of %d bytes", n, len(buf))
		}
		return fmt.Errorf("read content: %w", err)
	}
	return checkEOF(r, int64(len(buf)))
}

// checkEOF fails when r yields another byte after size bytes were read.
func checkEOF(r io.Reader, size int64) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	if n > 0 {
		return fmt.Errorf("content is longer than its declared %d bytes: %w", size, ErrTooLarge)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read content: %w", err)
	}
	return nil
}
