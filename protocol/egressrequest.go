package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RequestRule is an allow rule that limits the requests a host takes
// (glovebox.toml: allow = [{ host = "api.github.com", methods = ["GET"],
// paths = ["/repos/acme/"] }]). A host (and port) that any request rule
// names is reached only by the requests its request rules allow: the
// proxy reads every request to it, plain HTTP as it forwards it and HTTPS
// by terminating the agent's TLS with the box CA, and answers any other
// request with a 451 naming the rules. String allow rules and the default
// do not widen such a host; deny rules still win. Additive.
type RequestRule struct {
	// Host is a name rule as ParseEgressRule reads it: a name, *.domain
	// or *, with an optional :port (any port when none). Not an address.
	Host string `json:"host"`
	// Methods are the request methods allowed, upper-case as sent (GET);
	// none means every method.
	Methods []string `json:"methods,omitempty"`
	// Paths are path prefixes, written decoded ("/repos/acme/"): a
	// prefix ending in / matches every path under it, one that does not
	// matches itself and every path under it ("/acme/repo.git" matches
	// "/acme/repo.git/info/refs", not "/acme/repo.git2"). None means
	// every path. Matching is case-sensitive, on the request's path
	// decoded once; a request whose path is ambiguous (dot or empty
	// segments, ;, \, control characters, a % left after decoding) is
	// refused whatever the rules say (see CleanRequestPath).
	Paths []string `json:"paths,omitempty"`
}

// String writes the rule as glovebox.toml would: the name a 451 gives it.
func (r RequestRule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{ host = %s", strconv.Quote(r.Host))
	list := func(k string, vs []string) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(&b, ", %s = [", k)
		for i, v := range vs {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(v))
		}
		b.WriteString("]")
	}
	list("methods", r.Methods)
	list("paths", r.Paths)
	b.WriteString(" }")
	return b.String()
}

// Check reports every problem of a request rule, joined.
func (r RequestRule) Check() error {
	var errs []error
	er, err := ParseEgressRule(r.Host)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("host: %w", err))
	case er.Host == "":
		errs = append(errs, fmt.Errorf("host %q: a request rule names a host name (the name the agent connects to), not an address", r.Host))
	}
	if len(r.Methods) > 32 {
		errs = append(errs, fmt.Errorf("methods: %d methods, more than 32", len(r.Methods)))
	}
	for i, m := range r.Methods {
		if err := checkMethod(m); err != nil {
			errs = append(errs, fmt.Errorf("methods[%d]: %w", i, err))
		} else if slices.Index(r.Methods, m) != i {
			errs = append(errs, fmt.Errorf("methods[%d]: %q is listed twice", i, m))
		}
	}
	if len(r.Paths) > 1000 {
		errs = append(errs, fmt.Errorf("paths: %d paths, more than 1000", len(r.Paths)))
	}
	for i, p := range r.Paths {
		if err := CheckRulePath(p); err != nil {
			errs = append(errs, fmt.Errorf("paths[%d]: %w", i, err))
		} else if slices.Index(r.Paths, p) != i {
			errs = append(errs, fmt.Errorf("paths[%d]: %q is listed twice", i, p))
		}
	}
	return errors.Join(errs...)
}

// checkMethod accepts an upper-case HTTP method token.
func checkMethod(m string) error {
	if m == "" || len(m) > 20 {
		return fmt.Errorf("%q is not an HTTP method: want 1 to 20 upper-case letters, such as \"GET\"", m)
	}
	for _, c := range m {
		if !(c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return fmt.Errorf("%q is not an HTTP method: want upper-case letters, such as \"GET\" (methods are case-sensitive)", m)
		}
	}
	return nil
}

// CheckRulePath reports whether p can be a request rule's path prefix:
// it starts with /, is written decoded (no %), and has no segment a
// request's path could not match (., .., empty but the last), no ;, \,
// ?, # or control characters.
func CheckRulePath(p string) error {
	if len(p) > 2000 {
		return fmt.Errorf("path %q...: longer than 2000 characters", p[:40])
	}
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q: want a path starting with /, such as \"/repos/acme/\"", p)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("path %q: not UTF-8", p)
	}
	if i := strings.IndexAny(p, "%;\\?#"); i >= 0 {
		return fmt.Errorf("path %q: %q is not allowed in a path rule (write paths decoded, without query or parameters)", p, p[i])
	}
	if err := checkSegments(p); err != nil {
		return fmt.Errorf("path %q: %w", p, err)
	}
	return nil
}

// checkSegments refuses control characters and dot or empty segments
// (the last may be empty: a trailing slash).
func checkSegments(p string) error {
	for _, c := range p {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return fmt.Errorf("control character %q", c)
		}
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		switch {
		case s == "." || s == "..":
			return fmt.Errorf("a %q segment", s)
		case s == "" && i < len(segs)-1:
			return errors.New("an empty segment (//)")
		}
	}
	return nil
}

// CleanRequestPath returns the path of a request target's escaped path
// (as sent, before any query), decoded once, for matching against path
// rules. It refuses a path servers could read another way than the
// proxy: one that does not start with /, has a dot segment (./, ../,
// also as %2e), an empty segment (//), a ; (path parameters some servers
// drop), a \ (a separator on some servers), a control character (%00),
// bytes that are not UTF-8, or a % left after decoding (double encoding
// such as %252e). An encoded slash (%2F) decodes to a slash, so it
// cannot hide a segment from the rules.
func CleanRequestPath(escaped string) (string, error) {
	if !strings.HasPrefix(escaped, "/") {
		return "", fmt.Errorf("the path %q does not start with /", trimForError(escaped))
	}
	if len(escaped) > 8192 {
		return "", errors.New("the path is longer than 8192 bytes")
	}
	for i := 0; i < len(escaped); i++ {
		if c := escaped[i]; c <= 0x20 || c >= 0x7f {
			return "", fmt.Errorf("the path %q has the byte %#x, which a request line may not carry unescaped", trimForError(escaped), c)
		}
	}
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return "", fmt.Errorf("the path %q has a bad %%-escape", trimForError(escaped))
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("the path %q is not UTF-8 once decoded", trimForError(escaped))
	}
	if i := strings.IndexAny(p, "%;\\"); i >= 0 {
		return "", fmt.Errorf("the path %q has %q once decoded (double encoding, path parameters or a backslash): servers differ on what it means", trimForError(escaped), p[i])
	}
	if err := checkSegments(p); err != nil {
		return "", fmt.Errorf("the path %q has %v once decoded: servers differ on what it means", trimForError(escaped), err)
	}
	return p, nil
}

func trimForError(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// MatchPath reports whether the rule path prefix matches path (a
// CleanRequestPath result): a prefix ending in / matches every path that
// starts with it; any other matches itself and the paths under it.
func MatchPath(prefix, path string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(path, prefix)
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Match reports whether the rule allows method on path (a
// CleanRequestPath result). The host is matched by the caller.
func (r RequestRule) Match(method, path string) bool {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return false
	}
	if len(r.Paths) == 0 {
		return true
	}
	for _, p := range r.Paths {
		if MatchPath(p, path) {
			return true
		}
	}
	return false
}
