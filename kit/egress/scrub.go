package egress

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// needles are the byte strings that give a secret away in what a
// brokered host sends back: its value raw, URL-escaped, and base64 (as
// the password of a Basic Authorization, "user:value", or alone) in each
// of the three alignments it can take in a longer encoded string, in
// both alphabets. A base64 form is the part of the encoding that depends
// on the value alone, so it matches whatever comes before or after it.
func needles(value string) [][]byte {
	if value == "" {
		return nil
	}
	var out [][]byte
	add := func(s string) {
		for _, n := range out {
			if string(n) == s {
				return
			}
		}
		out = append(out, []byte(s))
	}
	add(value)
	add(url.QueryEscape(value))
	add(url.PathEscape(value))
	if len(value) >= 6 { // shorter values leave too short a core to tell apart
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			for k := range 3 {
				n := k + len(value)
				e := enc.EncodeToString(append(make([]byte, k), value...))
				skip := []int{0, 2, 3}[k] // characters that mix in the bytes before
				if end := 4 * (n / 3); end-skip >= 6 {
					add(e[skip:end])
				}
			}
		}
	}
	return out
}

// scrubber passes a body on with every needle replaced by as many
// asterisks, whatever chunks or TLS records the needle is split across:
// it holds back the end of what it has read while that end could be the
// start of a needle (at most len(longest needle)-1 bytes), until more
// comes or the body ends. Anything else passes at once, so a stream
// (server-sent events) is not held up.
type scrubber struct {
	r       io.ReadCloser
	needles [][]byte
	buf     []byte // read, scrubbed as far as it can be
	ready   int    // buf[:ready] may be passed on
	err     error
	// Hits counts the needles replaced.
	hits *int
}

func newScrubber(r io.ReadCloser, needles [][]byte, hits *int) *scrubber {
	return &scrubber{r: r, needles: needles, hits: hits}
}

// hold returns how many bytes at the end of buf could start a needle.
func (s *scrubber) hold() int {
	h := 0
	for _, n := range s.needles {
		for l := min(len(n)-1, len(s.buf)); l > h; l-- {
			if bytes.HasSuffix(s.buf, n[:l]) {
				h = l
				break
			}
		}
	}
	return h
}

func (s *scrubber) Read(p []byte) (int, error) {
	for {
		if s.ready > 0 {
			n := copy(p, s.buf[:s.ready])
			s.buf = s.buf[:copy(s.buf, s.buf[n:])]
			s.ready -= n
			return n, nil
		}
		if s.err != nil {
			return 0, s.err
		}
		if len(p) == 0 {
			return 0, nil
		}
		if free := cap(s.buf) - len(s.buf); free < 16<<10 {
			nb := make([]byte, len(s.buf), len(s.buf)+32<<10)
			copy(nb, s.buf)
			s.buf = nb
		}
		n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		s.err = err
		s.mask()
		if err != nil {
			s.ready = len(s.buf)
		} else {
			s.ready = len(s.buf) - s.hold()
		}
	}
}

// mask replaces every needle in buf, in place.
func (s *scrubber) mask() {
	for _, n := range s.needles {
		for off := 0; ; {
			i := bytes.Index(s.buf[off:], n)
			if i < 0 {
				break
			}
			for j := range n {
				s.buf[off+i+j] = '*'
			}
			off += i + len(n)
			*s.hits++
		}
	}
}

func (s *scrubber) Close() error { return s.r.Close() }

// scrubResponse makes resp safe to pass to the agent: the real values
// leave its headers (in place of each, its placeholder) and its body (in
// place of each, asterisks), its trailers are dropped, and a gzip or
// deflate body the host sent although it was asked for identity is
// decoded first. A body in an encoding the proxy cannot read is refused.
func (p *Proxy) scrubResponse(resp *http.Response, hits *int) error {
	p.hideValues(resp.Header)
	resp.Trailer = nil
	if resp.Body == nil || resp.Body == http.NoBody || (resp.Request != nil && resp.Request.Method == http.MethodHead) {
		return nil
	}
	var ns [][]byte
	for _, s := range p.secrets {
		ns = append(ns, needles(s.Value)...)
	}
	if len(ns) == 0 {
		return nil
	}
	ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	switch ce {
	case "", "identity":
	case "gzip", "x-gzip", "deflate":
		var (
			dec io.Reader
			err error
		)
		if ce == "deflate" {
			dec, err = zlib.NewReader(resp.Body)
		} else {
			dec, err = gzip.NewReader(resp.Body)
		}
		if err != nil {
			return fmt.Errorf("the brokered host sent a %s body the proxy cannot read: %w", ce, err)
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{dec, resp.Body}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.TransferEncoding = []string{"chunked"}
		resp.Uncompressed = true
	default:
		return fmt.Errorf("the brokered host answered in Content-Encoding %q although the proxy asked for identity; the proxy must read a brokered host's answers to keep the secret out of them", ce)
	}
	resp.Body = newScrubber(resp.Body, ns, hits)
	return nil
}
