package exec

import (
	"fmt"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	tests := []struct {
		limit  int
		writes []string
		want   string
	}{
		{5, nil, ""},
		{5, []string{"abc"}, "abc"},
		{5, []string{"abcde"}, "abcde"},
		{5, []string{"ab", "cd", "e"}, "abcde"},
		{5, []string{"abcdef"}, "[stdout truncated: the last 5 of 6 bytes follow]\nbcdef"},
		{5, []string{"ab", "cd", "ef", "gh", "ij", "kl"}, "[stdout truncated: the last 5 of 12 bytes follow]\nhijkl"},
		{5, []string{"abcd", "e", "fghij", "k"}, "[stdout truncated: the last 5 of 11 bytes follow]\ngh" + "ijk"},
		{4, []string{"x", "éé"}, "[stdout truncated: the last 4 of 5 bytes follow]\néé"},
		// The kept bytes start on a rune boundary: "€" is three bytes.
		{4, []string{"a€€"}, "[stdout truncated: the last 3 of 7 bytes follow]\n€"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit, tt.writes), func(t *testing.T) {
			tl := newTail(tt.limit)
			for _, w := range tt.writes {
				tl.Write([]byte(w))
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("tail(%d, %q).String() = %q, want %q", tt.limit, tt.writes, got, tt.want)
			}
		})
	}
}

// TestTailMany checks the kept bytes against the stream's end for writes of
// every size around the limit.
func TestTailMany(t *testing.T) {
	const limit = 64
	for size := 1; size <= 2*limit+1; size++ {
		tl := newTail(limit)
		var all strings.Builder
		for i := range 200 {
			w := strings.Repeat(string(rune('a'+i%26)), size)
			tl.Write([]byte(w))
			all.WriteString(w)
		}
		want := all.String()[all.Len()-limit:]
		_, got, _ := strings.Cut(tl.String(), "\n")
		if got != want {
			t.Fatalf("writes of %d: tail = %q, want %q", size, got, want)
		}
		if len(tl.buf) > 2*limit {
			t.Fatalf("writes of %d: buffer grew to %d bytes, want at most %d", size, len(tl.buf), 2*limit)
		}
	}
}

func TestUTF8Cut(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"ab\xc3", 2},        // first byte of é
		{"ab\xc3\xa9", 4},    // é complete
		{"a\xe2\x82", 1},     // two bytes of €
		{"a\xf0\x9f\x98", 1}, // three bytes of 😀
		{"a\xf0\x9f\x98\x80", 5},
		{"a\xff", 2}, // invalid: not held back
		{"a\x82", 2}, // a lone continuation byte
		{"\x82\x82\x82\x82", 4},
	}
	for _, tt := range tests {
		if got := utf8Cut([]byte(tt.in)); got != tt.want {
			t.Errorf("utf8Cut(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
