package fsapi

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/protocol"
)

// event is one inotify event as the kernel writes it.
func event(wd int, mask, cookie uint32, name string) []byte {
	n := 0
	if name != "" {
		n = (len(name) + 1 + 15) / 16 * 16 // NUL-padded, as the kernel aligns it
	}
	b := make([]byte, unix.SizeofInotifyEvent+n)
	binary.NativeEndian.PutUint32(b[0:], uint32(int32(wd)))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[8:], cookie)
	binary.NativeEndian.PutUint32(b[12:], uint32(n))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

// TestWatchParse: the kernel's events as FSEvents: a lost queue, a move
// out of the tree (a remove), a rename within it, a removed root (the
// end), a truncated record (ignored), and a flood capped with one lost
// event.
func TestWatchParse(t *testing.T) {
	w := &watcher{q: &req{rname: "work", rel: "top"}, inoFD: -1, max: 10,
		dirs: map[int]string{1: "top", 2: "top/sub"}, moved: map[uint32]movedFrom{}}
	var buf []byte
	for _, e := range [][]byte{
		event(-1, unix.IN_Q_OVERFLOW, 0, ""),
		event(1, unix.IN_CLOSE_WRITE, 0, "a.txt"),
		event(1, unix.IN_MOVED_FROM, 7, "a.txt"),
		event(2, unix.IN_MOVED_TO, 7, "b.txt"),
		event(2, unix.IN_MOVED_FROM, 9, "gone.txt"),
		event(9, unix.IN_CREATE, 0, "unknown-wd"),
		event(1, unix.IN_DELETE_SELF, 0, ""),
	} {
		buf = append(buf, e...)
	}
	buf = append(buf, 1, 2, 3) // a truncated record
	w.parse(buf)
	want := []protocol.FSEvent{
		{Type: "lost", Path: "work/top", Message: w.out[0].Message},
		{Type: "write", Path: "work/top/a.txt"},
		{Type: "rename", Path: "work/top/sub/b.txt", From: "work/top/a.txt"},
		{Type: "remove", Path: "work/top", Dir: true},
		{Type: "remove", Path: "work/top/sub/gone.txt"},
	}
	if len(w.out) != len(want) {
		t.Fatalf("parse = %+v, want %+v", w.out, want)
	}
	for i := range want {
		if w.out[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, w.out[i], want[i])
		}
	}
	if !w.gone {
		t.Error("the watched directory's DELETE_SELF did not end the watch")
	}

	w = &watcher{q: &req{rname: "work"}, inoFD: -1, max: 10, dirs: map[int]string{1: ""}, moved: map[uint32]movedFrom{}}
	buf = nil
	for range maxBatch + 50 {
		buf = append(buf, event(1, unix.IN_CLOSE_WRITE, 0, "f")...)
	}
	w.parse(buf)
	if len(w.out) != maxBatch+1 || w.out[maxBatch].Type != protocol.FSEventLost {
		t.Errorf("a flood gave %d events, the last %+v; want %d and a lost one", len(w.out), w.out[len(w.out)-1], maxBatch+1)
	}
}
