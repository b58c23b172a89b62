package generator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// A Problem is one thing wrong with a config file, at a line.
type Problem struct {
	File string
	Line int    // 1-based; 0 when unknown
	Key  string // the dotted key path, e.g. storage.outputs[1].below
	Msg  string
}

func (p Problem) Error() string {
	loc := p.File
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	if p.Key == "" {
		return loc + ": " + p.Msg
	}
	return loc + ": " + p.Key + ": " + p.Msg
}

// ConfigError lists every problem found in a config file, sorted by line.
type ConfigError struct {
	Problems []Problem
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As reach each Problem.
func (e *ConfigError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// doc is a decoded TOML document with the line of every key path. Paths
// join keys with dots and index arrays with [i]: "storage.outputs[0].use".
type doc struct {
	file  string
	root  map[string]any
	lines map[string]int
	probs []Problem
}

// parseDoc decodes data as TOML. A syntax error is returned as a
// ConfigError with its line.
func parseDoc(file string, data []byte) (*doc, error) {
	d := &doc{file: file, lines: map[string]int{}}
	if err := toml.Unmarshal(data, &d.root); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, _ := de.Position()
			return nil, &ConfigError{Problems: []Problem{{File: file, Line: row, Msg: "not valid TOML: " + de.Error()}}}
		}
		return nil, &ConfigError{Problems: []Problem{{File: file, Msg: "not valid TOML: " + err.Error()}}}
	}
	if d.root == nil {
		d.root = map[string]any{}
	}
	d.indexLines(data)
	return d, nil
}

// indexLines walks the TOML syntax tree and records the line where each key
// path is defined. The document is already known to be valid TOML.
func (d *doc) indexLines(data []byte) {
	ix := &lineIndex{d: d, arrays: map[string]int{}}
	ix.p.Reset(data)
	current := ""
	for ix.p.NextExpression() {
		e := ix.p.Expression()
		switch e.Kind {
		case unstable.Table:
			parts, ln := ix.keyParts(e.Key())
			current = ix.resolve("", parts)
			d.setLine(current, ln)
		case unstable.ArrayTable:
			parts, ln := ix.keyParts(e.Key())
			base := ix.resolve("", parts[:len(parts)-1])
			if base != "" {
				base += "."
			}
			base += quoteKey(parts[len(parts)-1])
			n := ix.arrays[base]
			ix.arrays[base] = n + 1
			d.setLine(base, ln)
			current = fmt.Sprintf("%s[%d]", base, n)
			d.setLine(current, ln)
		case unstable.KeyValue:
			parts, ln := ix.keyParts(e.Key())
			ix.value(ix.resolve(current, parts), e.Value(), ln)
		}
	}
}

// lineIndex is indexLines' walk: the parser, and the arrays of tables
// seen so far.
type lineIndex struct {
	d      *doc
	p      unstable.Parser
	arrays map[string]int // array-of-tables path -> element count
}

// line is the line n starts on.
func (ix *lineIndex) line(n *unstable.Node) int { return ix.p.Shape(n.Raw).Start.Line }

// resolve turns dotted key parts into a path, stepping into the last
// element of any array of tables on the way.
func (ix *lineIndex) resolve(prefix string, parts []string) string {
	path := prefix
	for _, k := range parts {
		if path != "" {
			path += "."
		}
		path += quoteKey(k)
		if n, ok := ix.arrays[path]; ok {
			path = fmt.Sprintf("%s[%d]", path, n-1)
		}
	}
	return path
}

// keyParts are a key's dotted parts and the line of its first.
func (ix *lineIndex) keyParts(it unstable.Iterator) ([]string, int) {
	var parts []string
	ln := 0
	for it.Next() {
		n := it.Node()
		parts = append(parts, string(n.Data))
		if ln == 0 {
			ln = ix.line(n)
		}
	}
	return parts, ln
}

// value records the line of path, and of every element and key within it.
func (ix *lineIndex) value(path string, v *unstable.Node, ln int) {
	ix.d.setLine(path, ln)
	switch v.Kind {
	case unstable.Array:
		i := 0
		for it := v.Children(); it.Next(); {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			cl := ln
			if c.Raw.Length > 0 {
				cl = ix.line(c)
			}
			ix.value(fmt.Sprintf("%s[%d]", path, i), c, cl)
			i++
		}
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			kv := it.Node()
			if kv.Kind != unstable.KeyValue {
				continue
			}
			parts, kl := ix.keyParts(kv.Key())
			ix.value(joinPath(path, parts), kv.Value(), kl)
		}
	}
}

func (d *doc) setLine(path string, ln int) {
	if _, ok := d.lines[path]; !ok && ln > 0 {
		d.lines[path] = ln
	}
}

// line returns the line of path, or of its nearest ancestor that has one.
func (d *doc) line(path string) int {
	for path != "" {
		if ln, ok := d.lines[path]; ok {
			return ln
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func (d *doc) errorf(path, format string, args ...any) {
	d.probs = append(d.probs, Problem{File: d.file, Line: d.line(path), Key: path, Msg: fmt.Sprintf(format, args...)})
}

// err returns the problems found so far as a ConfigError, or nil.
func (d *doc) err() error {
	if len(d.probs) == 0 {
		return nil
	}
	probs := append([]Problem(nil), d.probs...)
	sort.SliceStable(probs, func(i, j int) bool {
		if probs[i].Line != probs[j].Line {
			return probs[i].Line < probs[j].Line
		}
		return probs[i].Key < probs[j].Key
	})
	return &ConfigError{Problems: probs}
}

// table checks that v is a table whose keys are all in allowed and returns
// it. Unknown keys are reported with what is allowed.
func (d *doc) table(path string, v any, allowed ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "want a table, got %s", tomlType(v))
		return nil, false
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(allowed, k) {
			hint := ""
			if near := nearest(k, allowed); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			d.errorf(joinPath(path, []string{k}), "unknown key %q%s; allowed here: %s", k, hint, strings.Join(allowed, ", "))
		}
	}
	return m, true
}

func (d *doc) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		d.errorf(path, "want a string, got %s", tomlType(v))
	}
	return s, ok
}

func (d *doc) boolean(path string, v any) (bool, bool) {
	b, ok := v.(bool)
	if !ok {
		d.errorf(path, "want true or false, got %s", tomlType(v))
	}
	return b, ok
}

func (d *doc) integer(path string, v any) (int, bool) {
	n, ok := v.(int64)
	if !ok {
		d.errorf(path, "want an integer, got %s", tomlType(v))
		return 0, false
	}
	if n < 0 || n > 1<<31 {
		d.errorf(path, "%d is out of range: want 0 to %d", n, 1<<31)
		return 0, false
	}
	return int(n), true
}

func (d *doc) strList(path string, v any) ([]string, bool) {
	a, ok := v.([]any)
	if !ok {
		d.errorf(path, "want an array of strings, got %s", tomlType(v))
		return nil, false
	}
	out := make([]string, 0, len(a))
	good := true
	for i, e := range a {
		s, ok := d.str(fmt.Sprintf("%s[%d]", path, i), e)
		good = good && ok
		out = append(out, s)
	}
	return out, good
}

func (d *doc) strMap(path string, v any) (map[string]string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.errorf(path, "want a table of strings, got %s", tomlType(v))
		return nil, false
	}
	out := make(map[string]string, len(m))
	good := true
	for _, k := range sortedKeys(m) {
		s, ok := d.str(joinPath(path, []string{k}), m[k])
		good = good && ok
		out[k] = s
	}
	return out, good
}

func tomlType(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int64:
		return fmt.Sprintf("the integer %d", v)
	case float64:
		return fmt.Sprintf("the number %v", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("a %T", v)
}

func joinPath(prefix string, parts []string) string {
	path := prefix
	for _, k := range parts {
		if path != "" {
			path += "."
		}
		path += quoteKey(k)
	}
	return path
}

// quoteKey quotes a key that is not a bare TOML key, so a path stays
// readable and unambiguous.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return tomlstr(k)
		}
	}
	return k
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// nearest returns the allowed key closest to k by edit distance, when it
// is close enough to be a likely typo.
func nearest(k string, allowed []string) string {
	best, bestDist := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(k), strings.ToLower(a)); d < bestDist {
			best, bestDist = a, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
