package kit

import (
	"encoding/json"
	"sync/atomic"
	"unicode/utf8"
)

// Replay bounds: a resumable session keeps at most this many of its latest
// numbered frames, and at most this many bytes of them, for a client that
// reconnects.
const (
	replayFrames = 4096
	replayBytes  = 8 << 20
	// replayTotal bounds the replay buffers of all sessions together.
	replayTotal = 256 << 20
)

// replay is a session's buffer of its latest numbered frames. total, when
// set, counts the bytes of every session's buffer, which may hold limit
// bytes together (default replayTotal). Every frame kept counts, the
// latest one too: a frame that does not fit empties the buffer, and the
// session can then resume only from after it.
type replay struct {
	frames [][]byte
	first  uint64 // seq of frames[0]
	bytes  int
	total  *atomic.Int64
	limit  int64
}

func (r *replay) push(seq uint64, b []byte) {
	if len(r.frames) == 0 {
		r.first = seq
	}
	r.frames = append(r.frames, b)
	r.grow(len(b))
	for len(r.frames) > 0 && (len(r.frames) > replayFrames || r.bytes > replayBytes || r.overTotal()) {
		r.grow(-len(r.frames[0]))
		r.frames[0] = nil
		r.frames = r.frames[1:]
		r.first++
	}
}

func (r *replay) grow(n int) {
	r.bytes += n
	if r.total != nil {
		r.total.Add(int64(n))
	}
}

func (r *replay) overTotal() bool {
	limit := r.limit
	if limit <= 0 {
		limit = replayTotal
	}
	return r.total != nil && r.total.Load() > limit
}

// reset empties the buffer.
func (r *replay) reset() {
	r.grow(-r.bytes)
	*r = replay{total: r.total, limit: r.limit}
}

// since returns the frames numbered after last, given that cur is the
// latest seq. ok is false when some of them were already dropped or last
// is in the future.
func (r *replay) since(last, cur uint64) (frames [][]byte, ok bool) {
	if last > cur {
		return nil, false
	}
	if last == cur {
		return nil, true
	}
	if len(r.frames) == 0 || last+1 < r.first {
		return nil, false
	}
	out := make([][]byte, 0, cur-last)
	out = append(out, r.frames[last+1-r.first:]...)
	return out, true
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				const hex = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, "89"[r-'\u2028'])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendData appends an event's data as JSON: a json.RawMessage as it is
// (after checking it), nil as {}, anything else marshalled.
func appendData(b []byte, data any) ([]byte, error) {
	switch d := data.(type) {
	case nil:
		return append(b, '{', '}'), nil
	case json.RawMessage:
		if len(d) == 0 {
			return append(b, '{', '}'), nil
		}
		if !json.Valid(d) {
			return nil, errInvalidRaw
		}
		return append(b, d...), nil
	case string:
		return appendString(b, d), nil
	}
	j, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}
