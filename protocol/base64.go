package protocol

import (
	"encoding/base64"
	"io"
)

// NewBase64Reader returns a reader of s decoded as DecodeBase64 decodes it
// (standard or URL-safe base64, padded or not, white space ignored), a
// block at a time: an inline file of any size is checked or written
// without a decoded copy of it in memory. A read error is the
// base64.CorruptInputError DecodeBase64 would return, at the same offset.
func NewBase64Reader(s string) io.Reader {
	end := len(s)
	for end > 0 && (s[end-1] == '=' || isBase64Space(s[end-1])) {
		end--
	}
	return &base64Reader{s: s[:end]}
}

// base64Reader decodes s one block of base64Block characters at a time.
type base64Reader struct {
	s   string // the data not yet decoded, its trailing padding cut
	off int64  // characters decoded so far, white space left out
	in  [base64Block]byte
	buf [base64Block / 4 * 3]byte
	out []byte // decoded and not yet read
	err error  // after out: io.EOF or the data's error
}

// base64Block is a multiple of 4, so that every block but the last
// decodes on its own.
const base64Block = 4 << 10

func (r *base64Reader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.fill()
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// fill decodes the next block into out, or sets err.
func (r *base64Reader) fill() {
	n, i := 0, 0
	for ; n < len(r.in) && i < len(r.s); i++ {
		c := r.s[i]
		switch {
		case isBase64Space(c):
			continue
		case c == '-':
			c = '+'
		case c == '_':
			c = '/'
		}
		r.in[n] = c
		n++
	}
	r.s = r.s[i:]
	m, err := base64.RawStdEncoding.Decode(r.buf[:], r.in[:n])
	if err != nil {
		if ce, ok := err.(base64.CorruptInputError); ok {
			err = ce + base64.CorruptInputError(r.off)
		}
		r.err = err
		return
	}
	r.off += int64(n)
	r.out = r.buf[:m]
	if r.s == "" {
		r.err = io.EOF
	}
}

func isBase64Space(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
