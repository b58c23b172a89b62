package kit

import (
	"bytes"
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

// FuzzExecPath: a route a terminal or process takes is one segment, or
// two for a process's sub-route, never empty, never a dot segment, never
// holding a slash, backslash or NUL.
func FuzzExecPath(f *testing.F) {
	for _, s := range []string{"", "/", "/t1", "/p1/output", "/p1/", "//", "/p1/a/b", "/..", "/p1/..", "x", "/a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rest string) {
		id, sub, ok := execPath(rest)
		if !ok {
			if id != "" || sub != "" {
				t.Fatalf("execPath(%q) = %q, %q, false: want nothing with false", rest, id, sub)
			}
			return
		}
		if id == "" && (sub != "" || (rest != "" && rest != "/")) {
			t.Fatalf("execPath(%q) = %q, %q: a collection route from more than the collection", rest, id, sub)
		}
		for _, seg := range []string{id, sub} {
			if strings.ContainsAny(seg, "/\\\x00") || seg == "." || seg == ".." {
				t.Fatalf("execPath(%q) accepted segment %q", rest, seg)
			}
		}
		if id != "" {
			want := "/" + id
			if sub != "" {
				want += "/" + sub
			}
			if want != rest {
				t.Fatalf("execPath(%q) = %q, %q: not the path it came from", rest, id, sub)
			}
		}
	})
}

// FuzzRing: whatever is written in whatever pieces, the ring holds the
// stream's last size bytes, its buffer never grows past size, and every
// page is the stream's bytes at the offsets it names.
func FuzzRing(f *testing.F) {
	f.Add([]byte("hello world"), uint8(4), int64(0), uint16(3))
	f.Add(bytes.Repeat([]byte("x"), 300), uint8(7), int64(250), uint16(100))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8, off int64, limit uint16) {
		const size = 64
		g := &ring{size: size, changed: make(chan struct{})}
		step := int(cut%17) + 1
		for i := 0; i < len(data); i += step {
			g.write(data[i:min(i+step, len(data))])
		}
		if cap(g.buf) > size {
			t.Fatalf("the ring holds %d bytes, more than %d", cap(g.buf), size)
		}
		if off < 0 {
			off = -off
		}
		p, _ := g.page("stdout", off, int(limit)+1)
		got, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		end := int64(len(data))
		lo := max(0, end-size)
		wantFrom := min(max(off, lo), end)
		wantN := min(end-wantFrom, int64(limit)+1)
		if p.Offset != wantFrom || p.Next != wantFrom+wantN || !bytes.Equal(got, data[wantFrom:wantFrom+wantN]) {
			t.Fatalf("page(%d, %d) of %d bytes = %q at %d, next %d; want %q at %d", off, int(limit)+1, end, got, p.Offset, p.Next, data[wantFrom:wantFrom+wantN], wantFrom)
		}
		if wantDropped := max(0, lo-min(off, end)); p.Dropped != wantDropped {
			t.Fatalf("page(%d) dropped %d, want %d", off, p.Dropped, wantDropped)
		}
	})
}
