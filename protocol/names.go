package protocol

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxInputName is the longest input name, in bytes (a file name on most
// file systems).
const MaxInputName = 255

// ReservedInputPrefix starts the names of the temporary files a box writes
// inputs through; no input may take such a name.
const ReservedInputPrefix = ".input-"

// CheckInputName reports whether name may name an input file (the key of
// Prompt.Inputs). An input name is a plain file name that line-based tools,
// shells and language models read as what it is, so besides names that
// would leave the input directory ("", ".", "..", a / or \) it refuses:
// invalid UTF-8, control characters (newlines, tabs, escapes), bidi
// overrides and isolates, zero-width and other invisible characters,
// leading or trailing white space, a leading "-" (an option to every
// command that gets the name), the box's reserved prefix ".input-", look-
// alikes of / \ and . (fullwidth forms, division and fraction slashes) and
// names over MaxInputName bytes. The error names the rule broken and what
// to do. The box and the Go client apply the same rule.
func CheckInputName(name string) error {
	bad := func(rule string) error {
		return fmt.Errorf("input name %q: %s: rename the file (inputs are plain file names such as \"report.pdf\")", name, rule)
	}
	switch {
	case name == "":
		return fmt.Errorf("input name is empty: give every input a file name such as \"report.pdf\"")
	case name == "." || name == "..":
		return bad("not a file name")
	case len(name) > MaxInputName:
		return bad(fmt.Sprintf("longer than %d bytes", MaxInputName))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case strings.ContainsAny(name, `/\`):
		return bad("contains a path separator")
	case strings.HasPrefix(name, "-"):
		return bad("starts with \"-\", which commands read as an option")
	case strings.HasPrefix(name, ReservedInputPrefix):
		return bad(fmt.Sprintf("starts with %q, which the box reserves for its temporary files", ReservedInputPrefix))
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return bad("starts or ends with white space")
	}
	for _, r := range name {
		switch {
		case r == 0:
			return bad("contains a NUL byte")
		case unicode.IsControl(r):
			return bad(fmt.Sprintf("contains the control character %U", r))
		case isBidi(r):
			return bad(fmt.Sprintf("contains the bidirectional control %U, which makes the name read differently than it is", r))
		case isInvisible(r):
			return bad(fmt.Sprintf("contains the invisible character %U", r))
		case isLookalike(r):
			return bad(fmt.Sprintf("contains %U, which looks like / \\ or .", r))
		}
	}
	return nil
}

// isBidi reports the bidirectional formatting characters: marks,
// embeddings, overrides and isolates.
func isBidi(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case 0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069:
		return true
	}
	return false
}

// isInvisible reports characters that take no room: zero-width spaces and
// joiners, the word joiner and invisible operators, the byte order mark,
// the soft hyphen and the other format characters (category Cf), the
// zero-width joiner included; variation selectors are allowed.
func isInvisible(r rune) bool {
	switch {
	case 0xFE00 <= r && r <= 0xFE0F, 0xE0100 <= r && r <= 0xE01EF:
		return false // variation selectors
	case r == 0x180E, r == 0x3164, r == 0xFFA0, r == 0x115F, r == 0x1160:
		return true // Mongolian vowel separator, Hangul fillers
	}
	return unicode.Is(unicode.Cf, r)
}

// isLookalike reports characters that read as a path separator or a dot.
func isLookalike(r rune) bool {
	switch r {
	case 0xFF0F, 0xFF3C, 0xFF0E, // fullwidth solidus, reverse solidus, full stop
		0x2215, 0x2044, 0x29F8, 0x29F9, 0x2216, 0xFE68, // division and fraction slashes, big solidi, set minus, small reverse solidus
		0x2024, 0xFE52, 0x2027: // one dot leader, small full stop, hyphenation point
		return true
	}
	return false
}
