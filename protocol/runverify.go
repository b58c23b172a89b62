package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RunVerifyError says why a record failed verification.
type RunVerifyError struct {
	// Seq and Prompt identify the record, when it decodes.
	Seq    int64
	Prompt string
	// Problem says what is wrong.
	Problem string
	// Fields are the fields whose values no longer match their signed
	// digests, added or removed fields included ("outputs/report.pdf").
	Fields []string
}

func (e *RunVerifyError) Error() string {
	who := "run record"
	if e.Prompt != "" || e.Seq != 0 {
		who = fmt.Sprintf("run record %d (prompt %q)", e.Seq, e.Prompt)
	}
	return who + ": " + e.Problem
}

// RunChainError says where a session's chain of records broke.
type RunChainError struct {
	// At is the record's position in the chain, from 1.
	At      int
	Problem string
}

func (e *RunChainError) Error() string {
	return fmt.Sprintf("run chain broken at record %d: %s", e.At, e.Problem)
}

// Verify checks the record against the box's public key: the signature
// over the field digests, the digest, and each field's value against its
// digest. The error is a *RunVerifyError naming what differs.
func (s *SignedRun) Verify(pub ed25519.PublicKey) error {
	e := &RunVerifyError{}
	if r, err := s.Run(); err == nil {
		e.Seq, e.Prompt = r.Seq, r.Prompt
	}
	signed := canonicalDigests(s.Digests)
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		e.Problem = "the signature is not a base64 ed25519 signature"
		return e
	}
	if !ed25519.Verify(pub, append([]byte(RunSignContext), signed...), sig) {
		want := base64.StdEncoding.EncodeToString(pub)
		if s.PublicKey != want {
			e.Problem = fmt.Sprintf("signed with another key (%s) than the box's (%s): the record comes from another box, or the manifest is another box's", s.PublicKey, want)
		} else {
			e.Problem = "the signature does not match the field digests: the digests were changed"
		}
		return e
	}
	sum := sha256.Sum256(signed)
	if s.Digest != hex.EncodeToString(sum[:]) {
		e.Fields = []string{"digest"}
		e.Problem = "field digest was changed: it is not the SHA-256 of the signed field digests"
		return e
	}
	got, err := runFieldDigests(s.Record)
	if err != nil {
		e.Problem = "the record does not decode: " + err.Error()
		return e
	}
	for name, d := range s.Digests {
		if got[name] != d {
			e.Fields = append(e.Fields, name)
		}
	}
	for name := range got {
		if _, ok := s.Digests[name]; !ok {
			e.Fields = append(e.Fields, name)
		}
	}
	if len(e.Fields) > 0 {
		slices.Sort(e.Fields)
		e.Problem = fmt.Sprintf("changed after signing: %s (the value does not match its signed digest, or the field was added or removed)", strings.Join(e.Fields, ", "))
		return e
	}
	return nil
}

// VerifyRunChain verifies each record (Verify) and the links between
// them: one session, seq 1, 2, 3... and each prev the digest of the record
// before it (the first RunChainStart). Records must come in order, from
// the session's first. The error is a *RunVerifyError or a
// *RunChainError.
func VerifyRunChain(pub ed25519.PublicKey, recs []SignedRun) error {
	var session, prev string
	var prevSeq int64
	for i := range recs {
		s := &recs[i]
		if err := s.Verify(pub); err != nil {
			return fmt.Errorf("run chain, record %d: %w", i+1, err)
		}
		r, err := s.Run()
		if err != nil {
			return &RunChainError{At: i + 1, Problem: err.Error()}
		}
		if i == 0 {
			session, prev = r.Session, RunChainStart(r.Session)
		}
		switch {
		case r.Session != session:
			return &RunChainError{At: i + 1, Problem: fmt.Sprintf("it belongs to session %q, the chain to %q", r.Session, session)}
		case r.Prev != prev && i == 0:
			return &RunChainError{At: 1, Problem: fmt.Sprintf("it is seq %d and does not start the session: the records before it are missing", r.Seq)}
		case r.Prev != prev && r.Seq <= prevSeq:
			return &RunChainError{At: i + 1, Problem: fmt.Sprintf("seq %d comes after seq %d: the records are out of order", r.Seq, prevSeq)}
		case r.Prev != prev:
			return &RunChainError{At: i + 1, Problem: fmt.Sprintf("seq %d does not name record %d (seq %d) as its previous one: a record between them is missing or was replaced", r.Seq, i, prevSeq)}
		case r.Seq != prevSeq+1:
			return &RunChainError{At: i + 1, Problem: fmt.Sprintf("seq %d follows seq %d", r.Seq, prevSeq)}
		}
		prev, prevSeq = s.Digest, r.Seq
	}
	return nil
}

// runFieldDigests digests each field of a record's JSON (see the format
// above).
func runFieldDigests(record []byte) (map[string]string, error) {
	out := make(map[string]string, 32)
	add := func(name string, raw []byte) error {
		c, err := Canonical(raw)
		if err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		sum := sha256.Sum256(c)
		out[name] = hex.EncodeToString(sum[:])
		return nil
	}
	keys, vals, ok := splitCompact(record, true)
	if !ok {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(record, &top); err != nil {
			return nil, err
		}
		if top == nil {
			return nil, fmt.Errorf("the record is null")
		}
		for k, v := range top {
			keys, vals = append(keys, k), append(vals, v)
		}
	}
	for i, k := range keys {
		if err := addField(k, vals[i], add); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addField digests one top-level field: each member of inputs and
// outputs, each entry of egress, any other field (or one of those three
// of another JSON type) whole.
func addField(k string, v []byte, add func(string, []byte) error) error {
	switch k {
	case "inputs", "outputs":
		names, vals, ok := splitCompact(v, true)
		if !ok {
			var m map[string]json.RawMessage
			if json.Unmarshal(v, &m) != nil || m == nil {
				return add(k, v)
			}
			for name, mv := range m {
				names, vals = append(names, name), append(vals, mv)
			}
		}
		for i, name := range names {
			if err := add(k+"/"+name, vals[i]); err != nil {
				return err
			}
		}
		return nil
	case "egress":
		_, vals, ok := splitCompact(v, false)
		if !ok {
			var l []json.RawMessage
			if json.Unmarshal(v, &l) != nil || l == nil {
				return add(k, v)
			}
			vals = make([][]byte, len(l))
			for i := range l {
				vals[i] = l[i]
			}
		}
		for i, lv := range vals {
			if err := add(k+"/"+strconv.Itoa(i), lv); err != nil {
				return err
			}
		}
		return nil
	}
	return add(k, v)
}

// splitCompact splits a compact JSON object (or array) as encoding/json
// writes it into its members: the keys (plain strings, each once) and the
// raw values. ok is false for anything else (white space around a key, an
// escaped, non-UTF-8 or repeated key, a value that does not end where a
// member must), which the caller then hands to encoding/json. The values
// are not checked here: Canonical checks each.
func splitCompact(raw []byte, object bool) (keys []string, vals [][]byte, ok bool) {
	open, close := byte('['), byte(']')
	if object {
		open, close = '{', '}'
	}
	if len(raw) < 2 || raw[0] != open || raw[len(raw)-1] != close {
		return nil, nil, false
	}
	end := len(raw) - 1
	for i := 1; i < end; {
		if object {
			j := i + 1 + bytes.IndexByte(raw[min(i+1, end):end], '"')
			if raw[i] != '"' || j <= i || j+1 >= end || raw[j+1] != ':' {
				return nil, nil, false
			}
			key := raw[i+1 : j]
			if !canonicalScalar(raw[i:j+1]) || slices.Contains(keys, string(key)) {
				return nil, nil, false
			}
			keys = append(keys, string(key))
			i = j + 2
		}
		k := valueEnd(raw[:end], i)
		if k <= i {
			return nil, nil, false
		}
		vals = append(vals, raw[i:k])
		if k == end {
			break
		}
		if raw[k] != ',' || k+1 == end {
			return nil, nil, false
		}
		i = k + 1
	}
	if len(raw) == 2 {
		return nil, nil, true
	}
	return keys, vals, true
}

// valueEnd returns where the value starting at b[i] ends: the first
// comma outside strings and brackets, or len(b); -1 when its brackets or
// strings do not close there.
func valueEnd(b []byte, i int) int {
	depth, inString := 0, false
	for k := i; k < len(b); k++ {
		c := b[k]
		switch {
		case inString && c == '\\':
			k++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth < 0 {
				return -1
			}
		case c == ',' && depth == 0:
			return k
		}
	}
	if depth != 0 || inString {
		return -1
	}
	return len(b)
}

// canonicalDigests is the canonical encoding of a digests object.
func canonicalDigests(d map[string]string) []byte {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := []byte{'{'}
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCanonicalString(b, k)
		b = append(b, ':')
		b = appendCanonicalString(b, d[k])
	}
	return append(b, '}')
}

// maxSafeInt is the largest integer every JSON reader holds exactly.
const maxSafeInt = 1<<53 - 1

// Canonical re-encodes one JSON value in the run records' canonical
// encoding (see the format above). It fails on invalid JSON and on a
// non-integer or unsafe number; invalid UTF-8 reads as U+FFFD, as
// encoding/json reads it.
func Canonical(raw []byte) ([]byte, error) {
	if canonicalScalar(raw) || canonicalFlat(raw) {
		return raw, nil
	}
	return canonicalSlow(raw)
}

// canonicalSlow is Canonical by decoding and re-encoding.
func canonicalSlow(raw []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return appendCanonical(nil, v)
}

// canonicalFlat reports whether raw is a flat object already canonical:
// compact, its keys (plain strings) in increasing order, each value
// canonicalScalar. A record's files and egress decisions are.
func canonicalFlat(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	rest := raw[1 : len(raw)-1]
	var prev []byte
	for first := true; len(rest) > 0; first = false {
		if !first {
			if rest[0] != ',' || len(rest) == 1 {
				return false
			}
			rest = rest[1:]
		}
		// "key":
		end := bytes.IndexByte(rest[min(1, len(rest)):], '"') + 1
		if len(rest) < 2 || rest[0] != '"' || end < 1 || end+1 >= len(rest) || rest[end+1] != ':' {
			return false
		}
		key := rest[:end+1]
		if !canonicalScalar(key) || prev != nil && bytes.Compare(prev[1:len(prev)-1], key[1:end]) >= 0 {
			return false
		}
		prev, rest = key, rest[end+2:]
		// A value: up to the next comma outside a string.
		n := scalarLen(rest)
		if n == 0 || !canonicalScalar(rest[:n]) {
			return false
		}
		rest = rest[n:]
	}
	return true
}

// scalarLen is the length of the scalar at the start of b: a string (with
// no escapes, which canonicalScalar requires anyway) or a bare literal.
func scalarLen(b []byte) int {
	if len(b) > 0 && b[0] == '"' {
		return bytes.IndexByte(b[1:], '"') + 2 // 1 (no closing quote) fails canonicalScalar
	}
	n := bytes.IndexAny(b, ",{}[]\"")
	if n < 0 {
		return len(b)
	}
	return n
}

// canonicalScalar reports whether raw is already canonical: a string
// with no escape and no control character, an integer as Canonical
// writes it, true, false or null. Most of a record's fields are.
func canonicalScalar(raw []byte) bool {
	switch {
	case len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"':
		body := raw[1 : len(raw)-1]
		for _, c := range body {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
		}
		return utf8.Valid(body)
	case len(raw) > 0 && (raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9'):
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return err == nil && n <= maxSafeInt && n >= -maxSafeInt && strconv.FormatInt(n, 10) == string(raw)
	}
	s := string(raw)
	return s == "true" || s == "false" || s == "null"
}

func appendCanonical(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil || n > maxSafeInt || n < -maxSafeInt {
			return nil, fmt.Errorf("number %.40s is not an integer within ±2^53", x)
		}
		return strconv.AppendInt(b, n, 10), nil
	case string:
		return appendCanonicalString(b, x), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonicalString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}

// appendCanonicalString quotes s as JSON.stringify does.
func appendCanonicalString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' }) {
		return append(append(b, s...), '"')
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
