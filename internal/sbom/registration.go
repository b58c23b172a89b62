package sbom

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// StorePath is one store path of a closure, as closureInfo's registration
// file describes it.
type StorePath struct {
	Path string
	// NarHash is the sha256 of the path's NAR serialisation.
	NarHash [32]byte
	NarSize int64
	// References are the store paths this one refers to, itself
	// excluded, in the order the file gives them.
	References []string
}

// MaxPaths bounds the paths a registration file may list; real closures
// have thousands at most.
const MaxPaths = 1 << 20

// maxLine bounds one line of a registration file: a store path is at most
// 211 bytes in Nix, a hash a hundred.
const maxLine = 4096

// storePathRE is a store path: the store directory, a 32-character nix32
// hash, a name.
var storePathRE = regexp.MustCompile(`^/[^\x00\n]*/[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+._?=-]+$`)

// ParseRegistration reads the registration file of pkgs.closureInfo: for
// each path, its store path, NAR hash, NAR size, deriver (possibly an
// empty line), the number of its references and the references, one per
// line. It is the format of `nix-store --register-validity --hash-given`.
// Every path must appear once and every reference must be a path of the
// closure. The result is in the file's order.
func ParseRegistration(r io.Reader) ([]StorePath, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxLine)
	reg := &regReader{sc: sc}
	var paths []StorePath
	seen := map[string]bool{}
	for {
		path, ok, err := reg.line()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if path == "" {
			continue // the file may end with an empty line
		}
		if !storePathRE.MatchString(path) {
			return nil, reg.errorf("%q is not a store path", path)
		}
		if seen[path] {
			return nil, reg.errorf("%s is listed twice", path)
		}
		if len(paths) == MaxPaths {
			return nil, reg.errorf("more than %d paths", MaxPaths)
		}
		seen[path] = true
		p, err := reg.entry(path)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		for _, ref := range p.References {
			if !seen[ref] {
				return nil, fmt.Errorf("registration: %s refers to %s, which the closure does not list", p.Path, ref)
			}
		}
	}
	return paths, nil
}

// regReader reads a registration file line by line, counting lines for
// messages.
type regReader struct {
	sc *bufio.Scanner
	n  int
}

// line returns the next line; ok is false at the end of the file.
func (r *regReader) line() (string, bool, error) {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return "", false, fmt.Errorf("registration line %d: %w", r.n+1, err)
		}
		return "", false, nil
	}
	r.n++
	return r.sc.Text(), true, nil
}

// next returns the next line, which must be there.
func (r *regReader) next(what string) (string, error) {
	s, ok, err := r.line()
	if err == nil && !ok {
		err = fmt.Errorf("registration line %d: the file ends where %s should be", r.n+1, what)
	}
	return s, err
}

func (r *regReader) errorf(format string, args ...any) error {
	return fmt.Errorf("registration line %d: "+format, append([]any{r.n}, args...)...)
}

// entry reads the lines that follow a store path in the file.
func (r *regReader) entry(path string) (StorePath, error) {
	p := StorePath{Path: path}
	h, err := r.next("the NAR hash of " + path)
	if err != nil {
		return p, err
	}
	if p.NarHash, err = ParseNarHash(h); err != nil {
		return p, r.errorf("%w", err)
	}
	s, err := r.next("the NAR size of " + path)
	if err != nil {
		return p, err
	}
	if p.NarSize, err = strconv.ParseInt(s, 10, 64); err != nil || p.NarSize < 0 {
		return p, r.errorf("NAR size %q of %s is not a size", s, path)
	}
	if _, err := r.next("the deriver of " + path); err != nil {
		return p, err
	}
	c, err := r.next("the reference count of " + path)
	if err != nil {
		return p, err
	}
	n, err := strconv.Atoi(c)
	if err != nil || n < 0 || n > MaxPaths {
		return p, r.errorf("reference count %q of %s is not a count", c, path)
	}
	for range n {
		ref, err := r.next("a reference of " + path)
		if err != nil {
			return p, err
		}
		if !storePathRE.MatchString(ref) {
			return p, r.errorf("reference %q of %s is not a store path", ref, path)
		}
		if ref != path {
			p.References = append(p.References, ref)
		}
	}
	return p, nil
}

// ParseNarHash decodes a sha256 NAR hash in any form Nix writes one:
// "sha256:" with nix32 (Nix's own base32) or hex digits, or SRI
// ("sha256-" and base64).
func ParseNarHash(s string) ([32]byte, error) {
	var h [32]byte
	if b64, ok := strings.CutPrefix(s, "sha256-"); ok {
		b, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(b) != len(h) {
			return h, fmt.Errorf("NAR hash %q is not an SRI sha256 hash", s)
		}
		copy(h[:], b)
		return h, nil
	}
	digits, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return h, fmt.Errorf("NAR hash %q is not a sha256 hash (sha256:... or sha256-...)", s)
	}
	switch len(digits) {
	case hex.EncodedLen(len(h)):
		if _, err := hex.Decode(h[:], []byte(digits)); err != nil {
			return h, fmt.Errorf("NAR hash %q: %w", s, err)
		}
		return h, nil
	case nix32Len:
		if err := decodeNix32(h[:], digits); err != nil {
			return h, fmt.Errorf("NAR hash %q: %w", s, err)
		}
		return h, nil
	}
	return h, fmt.Errorf("NAR hash %q has %d digits, want 52 (nix32) or 64 (hex)", s, len(digits))
}

// nix32Alphabet is Nix's base32 alphabet (no e, o, u, t).
const nix32Alphabet = "0123456789abcdfghijklmnpqrsvwxyz"

// nix32Len is the length of a sha256 in nix32.
const nix32Len = (32*8-1)/5 + 1

var errNix32 = errors.New("not nix32")

// decodeNix32 decodes s into out as Nix does: the last character holds
// the lowest five bits.
func decodeNix32(out []byte, s string) error {
	clear(out)
	for n := range len(s) {
		d := strings.IndexByte(nix32Alphabet, s[len(s)-n-1])
		if d < 0 {
			return errNix32
		}
		b := n * 5
		i, j := b/8, uint(b%8)
		out[i] |= byte(d << j)
		carry := byte(d >> (8 - j))
		if i < len(out)-1 {
			out[i+1] |= carry
		} else if carry != 0 {
			return errNix32
		}
	}
	return nil
}
