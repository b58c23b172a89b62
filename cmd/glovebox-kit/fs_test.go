package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// fsBox is a session's files on a hostile box, through the Go client.
func fsBox(t *testing.T, h *hostile, sid string) *client.FS {
	t.Helper()
	c, err := client.New(map[string]client.Endpoint{"box": {URL: "ws://127.0.0.1:" + h.port + "/", Key: h.key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := c.Box("box")
	if err != nil {
		t.Fatal(err)
	}
	return b.FS(sid)
}

// owner is the uid that owns p on the host.
func owner(t *testing.T, p string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}

// httpStatus is the HTTP status an error of the client carries ("HTTP 404").
func httpStatus(err error) int {
	if err == nil {
		return 200
	}
	s := err.Error()
	if i := strings.Index(s, "HTTP "); i >= 0 {
		n, _ := strconv.Atoi(s[i+5 : i+8])
		return n
	}
	return -1
}

// TestFSAsTheSession runs the kit as root, as in its image (privilege
// separation, every sandbox layer): a session's files are written as the
// session's uid, read even where only the session may read them, and
// nothing outside its directories is reached: symbolic links out (to
// /etc/passwd, to another session's directory) and special files are
// refused.
func TestFSAsTheSession(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{Disk: "300MB"})
	c, sid := h.dial("")
	_, otherID := h.dial("")
	fs := fsBox(t, h, sid)
	ctx := testkit.Context(t, "the session's files")
	work := filepath.Join(h.root, "work", sid)
	if _, err := fs.Write(ctx, "work/sub/put.txt", strings.NewReader("from the client"), client.WriteOptions{Size: -1, Parents: true}); err != nil {
		t.Fatalf("write: %v", err)
	}
	uid := owner(t, work)
	if uid < 200000 {
		t.Fatalf("the session's work directory is uid %d's, want a session uid", uid)
	}
	for _, p := range []string{"sub", "sub/put.txt"} {
		if got := owner(t, filepath.Join(work, p)); got != uid {
			t.Errorf("work/%s is uid %d's, want the session's %d", p, got, uid)
		}
	}
	otherWork := filepath.Join(h.root, "work", otherID)
	m := promptResult(t, c, "setup", fmt.Sprintf(`cat sub/put.txt; echo
ln -s /etc/passwd pw; ln -s %s other; mkfifo fifo
mkdir -m 700 private; echo secret > private/f; chmod 600 private/f
mkdir many; (cd many && seq 10000 | xargs touch); echo ok`, otherWork))
	if msg, _ := m["message"].(string); m["type"] != "complete" || !strings.Contains(msg, "from the client") || !strings.HasSuffix(msg, "ok\n") {
		t.Fatalf("the agent reads what the client wrote: %v", m)
	}

	// A device node (made here: the session may make none) is listed,
	// never opened.
	if err := syscall.Mknod(filepath.Join(work, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	if e, err := fs.Stat(ctx, "work/null"); err != nil || e.Type != protocol.FSOther {
		t.Errorf("stat work/null = %+v, %v; want type other", e, err)
	}

	// What only the session may read, it reads.
	if rc, err := fs.Open(ctx, "work/private/f", 0, -1); err != nil {
		t.Errorf("read work/private/f (mode 0600 in a 0700 directory, the session's): %v", err)
	} else {
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "secret\n" {
			t.Errorf("work/private/f = %q", b)
		}
	}
	if l, err := fs.List(ctx, "work/private", client.ListOptions{}); err != nil || len(l.Entries) != 1 || l.Entries[0].Size != 7 {
		t.Errorf("list work/private = %+v, %v; want f, 7 bytes", l, err)
	}
	// Out of the session's directories: refused.
	for _, tc := range []struct {
		path string
		want int
	}{
		{"work/pw", 409},                // a link: never followed
		{"work/other/keep", 403},        // a link into another session's directory
		{"work/fifo", 400},              // a special file
		{"work/null", 400},              // a device
		{"work/sub/../../x", -1},        // refused by the client already
		{"work/" + otherID + "/x", 404}, // another session's id means nothing here
	} {
		rc, err := fs.Open(ctx, tc.path, 0, -1)
		if err == nil {
			rc.Close()
		}
		if got := httpStatus(err); got != tc.want {
			t.Errorf("read %s = %v (status %d), want %d", tc.path, err, got, tc.want)
		}
	}
	if _, err := fs.Write(ctx, "work/other/planted", strings.NewReader("x"), client.WriteOptions{Size: 1}); httpStatus(err) != 403 {
		t.Errorf("write through a link into another session = %v, want 403", err)
	}
	if _, err := os.Stat(filepath.Join(otherWork, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was planted in the other session: %v", err)
	}
	if e, err := fs.Stat(ctx, "work/pw"); err != nil || e.Type != protocol.FSSymlink || e.Target != "/etc/passwd" {
		t.Errorf("stat work/pw = %+v, %v", e, err)
	}

	// 10,000 entries, paged.
	n, pages, after := 0, 0, ""
	for {
		l, err := fs.List(ctx, "work/many", client.ListOptions{Limit: 1000, After: after})
		if err != nil {
			t.Fatalf("list work/many: %v", err)
		}
		n += len(l.Entries)
		pages++
		if l.Next == "" {
			break
		}
		after = l.Next
	}
	if n != 10000 || pages < 10 {
		t.Errorf("work/many: %d entries in %d pages, want 10,000 in 10 or 11", n, pages)
	}

	// Another owner's credential: 404.
	bob, _ := protocol.MintToken(h.key, protocol.TokenClaims{Scopes: []string{protocol.ScopeConnect}, Subject: "bob", Expires: time.Now().Add(time.Hour)})
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+h.port+"/sessions/"+sid+"/fs/work/sub/put.txt", nil)
	req.Header.Set("Authorization", "Bearer "+bob)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("another owner's credential: %v %v, want 404", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	// limits.disk: a body known to be too large is refused at once.
	if _, err := fs.Write(ctx, "work/huge", io.LimitReader(zeros{}, 400<<20), client.WriteOptions{Size: 400 << 20}); httpStatus(err) != 413 {
		t.Errorf("write of 400MB with limits.disk 300MB = %v, want 413", err)
	}
}

// TestFSLargeFilesStream: 100 MB up and down through a root kit, as the
// session, with the kit's serving process's memory bounded.
func TestFSLargeFilesStream(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{})
	_, sid := h.dial("")
	fs := fsBox(t, h, sid)
	ctx := testkit.Context(t, "100 MB up and down")
	const size = 100 << 20
	up := sha256.New()
	e, err := fs.Write(ctx, "output/big.bin", io.TeeReader(io.LimitReader(bytePattern{}, size), up), client.WriteOptions{Size: size})
	if err != nil || e.Size != size {
		t.Fatalf("write 100 MB: %+v, %v", e, err)
	}
	rc, err := fs.Open(ctx, "output/big.bin", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	down := sha256.New()
	got, err := io.Copy(down, rc)
	rc.Close()
	if err != nil || got != size || !bytes.Equal(up.Sum(nil), down.Sum(nil)) {
		t.Fatalf("read back %d bytes (%v), digests equal %v", got, err, bytes.Equal(up.Sum(nil), down.Sum(nil)))
	}
	if owner(t, filepath.Join(h.root, "output", sid, "big.bin")) < 200000 {
		t.Errorf("output/big.bin is not the session's")
	}
	front := listenerPid(t, h.port)
	hwm := vmHWM(t, front)
	t.Logf("the serving process's peak resident memory after 100 MB each way: %d MB", hwm>>20)
	if hwm > 80<<20 {
		t.Errorf("the kit's serving process peaked at %d MB of memory moving 100 MB each way, want it bounded (well under the file)", hwm>>20)
	}
}

// vmHWM is a process's peak resident memory.
func vmHWM(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// bytePattern is an endless stream of bytes that are not all alike.
type bytePattern struct{}

func (bytePattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return len(p), nil
}

// TestFSWatchAsTheSession: the agent's creates, writes, renames and
// removes reach a watch.
func TestFSWatchAsTheSession(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{})
	c, sid := h.dial("")
	fs := fsBox(t, h, sid)
	if m := promptResult(t, c, "d", `mkdir d`); m["type"] != "complete" {
		t.Fatalf("prompt: %v", m)
	}
	ctx, cancel := context.WithCancel(testkit.Context(t, "the watch's events"))
	defer cancel()
	events, err := fs.Watch(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() {
		var got []string
		for ev, err := range events {
			if err != nil {
				break
			}
			s := ev.Type + " " + ev.Path
			if ev.From != "" {
				s += " from " + ev.From
			}
			got = append(got, s)
			if ev.Type == protocol.FSEventRemove {
				break
			}
		}
		done <- got
	}()
	if m := promptResult(t, c, "w", `echo a > d/w.txt; mv d/w.txt w2.txt; rm w2.txt`); m["type"] != "complete" {
		t.Fatalf("prompt: %v", m)
	}
	var got []string
	select {
	case got = <-done:
	case <-ctx.Done():
		t.Fatalf("the events did not come: %v", context.Cause(ctx))
	}
	want := []string{"create work/d/w.txt", "write work/d/w.txt", "rename work/w2.txt from work/d/w.txt", "remove work/w2.txt"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
