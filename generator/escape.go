package generator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The helpers below render a Go string as a literal of the target language.
// Every value the templates interpolate goes through one of them, so that
// no value can end a string, start an interpolation or add a line.

// nixstr renders s as a Nix double-quoted string. Backslash, the quote, $
// (so "${" cannot start an interpolation) and control characters are
// escaped.
func nixstr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '$':
			b.WriteString(`\$`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case utf8.RuneError:
			b.WriteString("\uFFFD")
		default:
			if r < 0x20 || r == 0x7f {
				// Nix strings have no \u escape: drop other control
				// characters rather than emit them raw.
				b.WriteString("\uFFFD")
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// nixlist renders ss as a Nix list of strings on one line.
func nixlist(ss []string) string {
	if len(ss) == 0 {
		return "[ ]"
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = nixstr(s)
	}
	return "[ " + strings.Join(parts, " ") + " ]"
}

// tomlstr renders s as a TOML basic string.
func tomlstr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomllist renders ss as a TOML array of strings on one line.
func tomllist(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = tomlstr(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// shellquote renders s as one POSIX shell word: single-quoted, with each
// single quote closed, escaped and reopened. Words made only of safe
// characters are left bare for readability.
func shellquote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@+,%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shelljoin quotes each word and joins them with spaces.
func shelljoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellquote(w)
	}
	return strings.Join(q, " ")
}

// jsonstr renders s as a JSON string (also valid in a Dockerfile's exec
// form).
func jsonstr(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return string(b)
}

// envvalue renders s for the right-hand side of a .env line: bare when it
// is plain, double-quoted with escapes otherwise. A newline cannot end the
// assignment.
func envvalue(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@+,%=", r))
	}) < 0 {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "$", `\$`, "`", "\\`")
	return `"` + r.Replace(s) + `"`
}

// comment renders s as the text of a one-line comment: line breaks become
// spaces so the text cannot escape the comment.
func comment(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r < 0x20 && r != '\t' || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

var nixIdentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_'-]*$`)

// nixkey renders s as a Nix attribute name: bare when it is an identifier
// and not a keyword, a quoted string otherwise.
func nixkey(s string) string {
	switch s {
	case "if", "then", "else", "assert", "with", "let", "in", "rec", "inherit", "or":
		return nixstr(s)
	}
	if nixIdentRE.MatchString(s) {
		return s
	}
	return nixstr(s)
}
