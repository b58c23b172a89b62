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
	line := 0
	next := func(what string) (string, error) {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return "", fmt.Errorf("registration line %d: %w", line+1, err)
			}
			return "", fmt.Errorf("registration line %d: the file ends where %s should be", line+1, what)
		}
		line++
		return sc.Text(), nil
	}
	var paths []StorePath
	seen := map[string]bool{}
	for {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return nil, fmt.Errorf("registration line %d: %w", line+1, err)
			}
			break
		}
		line++
		p := StorePath{Path: sc.Text()}
		if p.Path == "" {
			// The file may end with an empty line.
			continue
		}
		if !storePathRE.MatchString(p.Path) {
			return nil, fmt.Errorf("registration line %d: %q is not a store path", line, p.Path)
		}
		if seen[p.Path] {
			return nil, fmt.Errorf("registration line %d: %s is listed twice", line, p.Path)
		}
		if len(paths) == MaxPaths {
			return nil, fmt.Errorf("registration line %d: more than %d paths", line, MaxPaths)
		}
		seen[p.Path] = true
		h, err := next("the NAR hash of " + p.Path)
		if err != nil {
			return nil, err
		}
		if p.NarHash, err = ParseNarHash(h); err != nil {
			return nil, fmt.Errorf("registration line %d: %w", line, err)
		}
		s, err := next("the NAR size of " + p.Path)
		if err != nil {
			return nil, err
		}
		if p.NarSize, err = strconv.ParseInt(s, 10, 64); err != nil || p.NarSize < 0 {
			return nil, fmt.Errorf("registration line %d: NAR size %q of %s is not a size", line, s, p.Path)
		}
		if _, err := next("the deriver of " + p.Path); err != nil {
			return nil, err
		}
		c, err := next("the reference count of " + p.Path)
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > MaxPaths {
			return nil, fmt.Errorf("registration line %d: reference count %q of %s is not a count", line, c, p.Path)
		}
		for range n {
			ref, err := next("a reference of " + p.Path)
			if err != nil {
				return nil, err
			}
			if !storePathRE.MatchString(ref) {
				return nil, fmt.Errorf("registration line %d: reference %q of %s is not a store path", line, ref, p.Path)
			}
			if ref != p.Path {
				p.References = append(p.References, ref)
			}
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
