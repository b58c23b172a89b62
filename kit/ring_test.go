package kit

import (
	"encoding/base64"
	"strings"
	"testing"
)

// The ring keeps a stream's latest bytes by absolute offsets, and says
// how many of those asked for it dropped.
func TestRingPages(t *testing.T) {
	g := &ring{size: 8, changed: make(chan struct{})}
	g.write([]byte("abc"))
	g.write([]byte("defghij"))                           // 10 bytes: "ab" dropped
	g.write([]byte(strings.Repeat("z", 20) + "0123456")) // 37 in all
	for _, tc := range []struct {
		off     int64
		limit   int
		want    string
		from    int64
		dropped int64
	}{
		{0, 100, "zz0123456"[1:], 29, 29},
		{30, 3, "012", 30, 0},
		{36, 100, "6", 36, 0},
		{37, 100, "", 37, 0},
		{99, 100, "", 37, 0},
	} {
		p, _ := g.page("stdout", tc.off, tc.limit)
		data, _ := base64.StdEncoding.DecodeString(p.Data)
		if string(data) != tc.want || p.Offset != tc.from || p.Dropped != tc.dropped || p.Next != tc.from+int64(len(data)) || p.EOF {
			t.Errorf("page(%d, %d) = %q at %d, dropped %d, next %d, eof %v; want %q at %d, dropped %d", tc.off, tc.limit, data, p.Offset, p.Dropped, p.Next, p.EOF, tc.want, tc.from, tc.dropped)
		}
	}
	if cap(g.buf) > 8 {
		t.Errorf("the ring holds %d bytes, want at most 8", cap(g.buf))
	}
	g.eof = true
	if p, _ := g.page("stdout", 30, 3); p.EOF {
		t.Errorf("a page short of the end says eof")
	}
	if p, _ := g.page("stdout", 30, 100); !p.EOF {
		t.Errorf("a page to the end of an ended stream does not say eof")
	}
}
