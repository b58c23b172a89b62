package protocol_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/glovebox-dev/glovebox/protocol"
)

func TestParseFSPath(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", protocol.MaxFSName)
	for _, tc := range []struct {
		in, root, rel string
		err           string // a part of the error; "" for none
	}{
		{"work", "work", "", ""},
		{"work/", "work", "", ""},
		{"input/a.pdf", "input", "a.pdf", ""},
		{"output/a/b/c.txt", "output", "a/b/c.txt", ""},
		{"work/a/", "work", "a", ""},
		{"work/.hidden", "work", ".hidden", ""},
		{"work/...", "work", "...", ""},
		{"work/a b/ü.txt", "work", "a b/ü.txt", ""},
		{"work/" + long, "work", long, ""},
		{"", "", "", "want one of the session's directories"},
		{"/work/a", "", "", "want one of the session's directories"},
		{"tmp/a", "", "", `"tmp" is not one of`},
		{"Work/a", "", "", "is not one of"},
		{"work/../etc/passwd", "", "", `a ".." name`},
		{"work/a/..", "", "", `a ".." name`},
		{"work/./a", "", "", `a "." name`},
		{"work//a", "", "", "an empty name"},
		{"work/a//", "", "", "an empty name"},
		{"work/a\\b", "", "", "a backslash"},
		{"work/a\x00b", "", "", "control character U+0000"},
		{"work/a\nb", "", "", "control character U+000A"},
		{"work/a\x7f", "", "", "control character U+007F"},
		{"work/\xff", "", "", "not valid UTF-8"},
		{"work/" + long + "a", "", "", "a name longer than 255"},
		{"work/" + strings.Repeat("a/", 2049), "", "", "longer than 4096"},
	} {
		root, rel, err := protocol.ParseFSPath(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseFSPath(%q) = %v, want %q %q", tc.in, err, tc.root, tc.rel)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseFSPath(%q) = %q, %q, %v; want an error with %q", tc.in, root, rel, err, tc.err)
		case tc.err == "" && (root != tc.root || rel != tc.rel):
			t.Errorf("ParseFSPath(%q) = %q, %q; want %q, %q", tc.in, root, rel, tc.root, tc.rel)
		}
	}
}

func TestDecodeFSOp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op, body string
		want     protocol.FSOp
		err      string
	}{
		{"mkdir", "", protocol.FSOp{}, ""},
		{"mkdir", `{"parents":true}`, protocol.FSOp{Parents: true}, ""},
		{"move", `{"to":"output/b.txt"}`, protocol.FSOp{To: "output/b.txt"}, ""},
		{"copy", `{}`, protocol.FSOp{}, `op "copy"`},
		{"move", ``, protocol.FSOp{}, "names no destination"},
		{"move", `{"to":"work"}`, protocol.FSOp{}, "cannot be replaced"},
		{"move", `{"to":"work/../x"}`, protocol.FSOp{}, `a ".." name`},
		{"move", `{"to":"a","x":1}`, protocol.FSOp{}, "unknown field"},
		{"move", `{"to":"work/a"} {}`, protocol.FSOp{}, "more than one"},
		{"move", `[1]`, protocol.FSOp{}, "not the JSON object"},
		{"mkdir", `{"to":"work/a"}`, protocol.FSOp{}, "move's option"},
		{"mkdir", strings.Repeat(" ", protocol.MaxFSOpBody+1), protocol.FSOp{}, "over"},
	} {
		got, err := protocol.DecodeFSOp(tc.op, []byte(tc.body))
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("DecodeFSOp(%q, %q) = %+v, %v; want %+v", tc.op, tc.body, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("DecodeFSOp(%q, %q) = %+v, %v; want an error with %q", tc.op, tc.body, got, err, tc.err)
		}
	}
}

// FuzzParseFSPath: whatever the input, an accepted path has a known root
// and a rel that joins back to it and that no file system call could read
// as leaving the root.
func FuzzParseFSPath(f *testing.F) {
	for _, s := range []string{"work", "work/a/b", "input/../x", "output//a", "work/a\\b", "work/\x00", "work/\xff", "x/y", "work/a/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		root, rel, err := protocol.ParseFSPath(in)
		if err != nil {
			if len(err.Error()) > 1000 {
				t.Fatalf("ParseFSPath(%q): an error of %d bytes", in, len(err.Error()))
			}
			return
		}
		if protocol.FSRootIndex(root) < 0 {
			t.Fatalf("ParseFSPath(%q) root %q", in, root)
		}
		if !utf8.ValidString(rel) || len(rel) > protocol.MaxFSPath || strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") || strings.ContainsAny(rel, "\\\x00") {
			t.Fatalf("ParseFSPath(%q) rel %q", in, rel)
		}
		if rel != "" {
			for _, name := range strings.Split(rel, "/") {
				if name == "" || name == "." || name == ".." || len(name) > protocol.MaxFSName {
					t.Fatalf("ParseFSPath(%q) rel %q has name %q", in, rel, name)
				}
			}
		}
		r2, rel2, err := protocol.ParseFSPath(protocol.FSPath(root, rel))
		if err != nil || r2 != root || rel2 != rel {
			t.Fatalf("ParseFSPath(FSPath(%q, %q)) = %q, %q, %v", root, rel, r2, rel2, err)
		}
	})
}

// FuzzDecodeFSOp: bodies never crash the decoder, and an accepted move's
// destination parses.
func FuzzDecodeFSOp(f *testing.F) {
	f.Add("move", []byte(`{"to":"work/a"}`))
	f.Add("mkdir", []byte(`{"parents":true}`))
	f.Add("mkdir", []byte(``))
	f.Add("move", []byte(`{"to":"work/.."}`))
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		o, err := protocol.DecodeFSOp(op, body)
		if err != nil {
			return
		}
		if op == protocol.FSOpMove {
			if _, rel, err := protocol.ParseFSPath(o.To); err != nil || rel == "" {
				t.Fatalf("DecodeFSOp(move, %q) accepted to %q: %v", body, o.To, err)
			}
		}
	})
}
