package protocol

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckInputName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"report.pdf", "a b.txt", "Überblick.md", "日本語.txt", "x", ".hidden", "a-b_c.tar.gz", "emoji😀.png", "caf\u00e9", "a\ufe0f.txt", strings.Repeat("n", MaxInputName)} {
		if err := CheckInputName(name); err != nil {
			t.Errorf("CheckInputName(%q) = %v, want nil", name, err)
		}
	}
	for _, tc := range []struct{ name, rule string }{
		{"", "empty"},
		{".", "not a file name"},
		{"..", "not a file name"},
		{"a/b", "path separator"},
		{`a\b`, "path separator"},
		{"../etc/passwd", "path separator"},
		{"a\nb", "control character U+000A"},
		{"a\tb", "control character U+0009"},
		{"a\rb", "control character U+000D"},
		{"a\x1b[31mb", "control character U+001B"},
		{"a\x7f", "control character U+007F"},
		{"a\u0085b", "control character U+0085"},
		{"a\x00b", "NUL"},
		{"evil\u202egnp.exe", "bidirectional control U+202E"},
		{"a\u2066b\u2069", "bidirectional control U+2066"},
		{"a\u200fb", "bidirectional control U+200F"},
		{"a\u200bb", "invisible character U+200B"},
		{"a\u200db", "invisible character U+200D"},
		{"\ufeffa", "invisible character U+FEFF"},
		{"a\u00adb", "invisible character U+00AD"},
		{"a\u2060b", "invisible character U+2060"},
		{" a.txt", "white space"},
		{"a.txt ", "white space"},
		{"\u3000a", "white space"},
		{"a.txt\u00a0", "white space"},
		{"-rf", `starts with "-"`},
		{"--help", `starts with "-"`},
		{".input-123", "reserves"},
		{"a\uff0fb", "looks like"},
		{"a\uff3cb", "looks like"},
		{"\uff0e\uff0e", "looks like"},
		{"a\u2215b", "looks like"},
		{"a\u2044b", "looks like"},
		{"a\xffb", "UTF-8"},
		{strings.Repeat("n", MaxInputName+1), "longer than"},
	} {
		err := CheckInputName(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("CheckInputName(%q) = %v, want an error naming %q", tc.name, err, tc.rule)
		}
	}
}

// FuzzCheckInputName checks that every name the rule accepts is a plain,
// visible file name: one path element, valid UTF-8, no control, bidi or
// format character, no surrounding space, no leading dash.
func FuzzCheckInputName(f *testing.F) {
	for _, s := range []string{"report.pdf", "a/b", "..", "-rf", " a", "a\u202e", "a\u200b", "\uff0f", ".input-x", "日本語", "a\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckInputName(name)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "input name") {
				t.Errorf("error %q does not start with \"input name\"", err)
			}
			return
		}
		switch {
		case !utf8.ValidString(name), name == "", name == ".", name == "..":
			t.Fatalf("accepted %q", name)
		case filepath.Base(name) != name, strings.ContainsAny(name, `/\`):
			t.Fatalf("accepted %q, which is not one path element", name)
		case strings.TrimSpace(name) != name, strings.HasPrefix(name, "-"), strings.HasPrefix(name, ReservedInputPrefix):
			t.Fatalf("accepted %q", name)
		case len(name) > MaxInputName:
			t.Fatalf("accepted %d bytes", len(name))
		}
		for _, r := range name {
			if unicode.IsControl(r) || isBidi(r) || (unicode.Is(unicode.Cf, r)) || isLookalike(r) {
				t.Fatalf("accepted %q with %U", name, r)
			}
		}
	})
}
