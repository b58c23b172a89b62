//go:build linux

package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"unsafe"

	"golang.org/x/sys/unix"
)

func helperOf(t *testing.T, ss *Session) *Helper {
	t.Helper()
	h, err := ss.Helper()
	if err != nil {
		t.Fatalf("Helper: %v", err)
	}
	return h
}

// TestHelperActsAsTheSession: files the helper makes are the session's;
// it cannot read what the session cannot; what it opens the kit reads
// and writes directly.
func TestHelperActsAsTheSession(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "helper")
	h := helperOf(t, ss)
	f, err := h.Open(RootWork, "made.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		t.Fatalf("Open for writing: %v", err)
	}
	if _, err := f.WriteString("written by the kit"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "made.txt"), &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Uid) != ss.UID() {
		t.Errorf("made.txt is uid %d's, want the session's %d", st.Uid, ss.UID())
	}
	if out, _ := run(t, ss, dir, "cat made.txt"); out != "written by the kit" {
		t.Errorf("the session reads %q", out)
	}
	// Root's file in the session's directory: the session may not read
	// it, so neither may the helper, though the kit (root) could.
	if err := os.WriteFile(filepath.Join(dir, "roots"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(RootWork, "roots", os.O_RDONLY, 0); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Open of root's 0600 file = %v, want permission denied", err)
	}
	if err := h.MkdirAll(RootWork, "a/b/c", 0o755); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := h.Mkdir(RootWork, "a/b/c", 0o755); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir of an existing directory = %v, want exists", err)
	}
	if err := h.Rename(RootWork, "made.txt", RootWork, "a/b/c/moved.txt"); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	d, err := h.Open(RootWork, "a/b/c", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatalf("Open a directory: %v", err)
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	if strings.Join(names, ",") != "moved.txt" {
		t.Errorf("a/b/c holds %q, want moved.txt", names)
	}
	if err := h.Remove(RootWork, "a/b/c/moved.txt"); err != nil {
		t.Fatalf("Remove a file: %v", err)
	}
	if err := h.Remove(RootWork, "a/b/c"); err != nil {
		t.Fatalf("Remove an empty directory: %v", err)
	}
	if err := h.RemoveAll(RootWork, "a"); err != nil {
		t.Fatalf("RemoveAll: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a after RemoveAll: %v", err)
	}
	for _, rel := range []string{"", ".", "..", "../x"} {
		if err := h.RemoveAll(RootWork, rel); err == nil {
			t.Errorf("RemoveAll(%q) succeeded, want the root kept", rel)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the session's directory: %v", err)
	}
}

// TestHelperStaysBeneathTheRoot: "..", absolute and escaping symbolic
// links, a final symbolic link and special files are refused.
func TestHelperStaysBeneathTheRoot(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "beneath")
	other, otherDir := b.session(t, "other")
	_ = other
	if err := os.WriteFile(filepath.Join(otherDir, "theirs"), []byte("other session"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, st := run(t, ss, dir, "ln -s /etc etc && ln -s /etc/passwd passwd && ln -s .. up && mkdir -p in/deep && ln -s in inside && echo hi > in/deep/f && mkfifo fifo && echo ok"); st.Code != 0 {
		t.Fatalf("setting up: %s %v", out, st)
	}
	h := helperOf(t, ss)
	for _, tc := range []struct {
		rel  string
		want error
	}{
		{"../x", ErrOutside},
		{"/etc/passwd", ErrOutside},
		{"etc/passwd", ErrOutside},
		{"up/" + filepath.Base(otherDir) + "/theirs", ErrOutside},
		{"passwd", syscall.ELOOP},
		{"fifo", ErrSpecial},
		{"nope", fs.ErrNotExist},
	} {
		f, err := h.Open(RootWork, tc.rel, os.O_RDONLY, 0)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("Open(%q) = %v, want %v", tc.rel, err, tc.want)
		}
	}
	// A symbolic link that stays beneath the root is followed.
	f, err := h.Open(RootWork, "inside/deep/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("Open through a link inside: %v", err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if string(got) != "hi\n" {
		t.Errorf("read %q", got)
	}
	// The link itself, with O_PATH.
	l, err := h.Open(RootWork, "passwd", unix.O_PATH, 0)
	if err != nil {
		t.Fatalf("Open the link with O_PATH: %v", err)
	}
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(int(l.Fd()), "", buf)
	l.Close()
	if err != nil || string(buf[:n]) != "/etc/passwd" {
		t.Errorf("Readlinkat = %q, %v", buf[:n], err)
	}
	if err := h.Rename(RootWork, "in", RootWork, "../escaped"); !errors.Is(err, ErrOutside) {
		t.Errorf("Rename out = %v, want ErrOutside", err)
	}
	if _, err := h.Open(RootOutput, "x", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open in a root the session lacks = %v, want not exist", err)
	}
}

// TestHelperWatch: a watch added through the helper reports what the
// session does in the directory.
func TestHelperWatch(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "watch")
	h := helperOf(t, ss)
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	ino := os.NewFile(uintptr(fd), "inotify")
	defer ino.Close()
	// IN_DONT_FOLLOW is honoured by resolving without links, and does not
	// refuse the directory's own /proc name.
	wd, err := h.Watch(ino, RootWork, "", unix.IN_CREATE|unix.IN_CLOSE_WRITE|unix.IN_DONT_FOLLOW)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if _, st := run(t, ss, dir, "echo x > new.txt"); st.Code != 0 {
		t.Fatal(st)
	}
	buf := make([]byte, 4096)
	ino.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := ino.Read(buf)
	if err != nil {
		t.Fatalf("reading events: %v", err)
	}
	ev := (*unix.InotifyEvent)(unsafePointer(buf))
	name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+ev.Len]), "\x00")
	if int(ev.Wd) != wd || name != "new.txt" || n < unix.SizeofInotifyEvent {
		t.Errorf("event wd %d name %q, want wd %d new.txt", ev.Wd, name, wd)
	}
}

// TestHelperDialInsideTheNamespace: Dial reaches a port the session
// listens on in its own network namespace, which the kit's own loopback
// does not have.
func TestHelperDialInsideTheNamespace(t *testing.T) {
	node, err := lookPath("node", []string{"PATH=/usr/local/bin:/usr/bin:/bin"})
	if err != nil {
		t.Skip("needs node for a server in the session")
	}
	b := newBox(t, Config{})
	if !b.sb.Report().Has(LayerNetwork) {
		t.Skip("no network namespaces here")
	}
	ss, dir := b.session(t, "dial")
	r, w, _ := os.Pipe()
	defer r.Close()
	p, err := ss.Start(Spec{Path: node, Args: []string{"node", "-e", `require("net").createServer(s => s.end("from the session\n")).listen(18080, "127.0.0.1", () => console.log("up"))`},
		Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: w, Stderr: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(r).ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if l != "up\n" {
			t.Fatalf("the server said %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not start within 20s")
	}
	h := helperOf(t, ss)
	c, err := h.Dial(18080)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "from the session\n" {
		t.Errorf("read %q", got)
	}
	if _, err := h.Dial(18081); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial of a closed port = %v, want refused", err)
	}
}

// TestHelperAside: the helper does not keep the session's commands'
// leftovers alive (the last command's end still ends them, the helper
// with them), and the next call starts another helper.
func TestHelperAside(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "aside")
	h := helperOf(t, ss)
	if out, st := run(t, ss, dir, "sleep 300 >/dev/null 2>&1 & echo started"); st.Code != 0 {
		t.Fatal(out, st)
	}
	if out, _ := run(t, ss, dir, "ps -e -o comm= 2>/dev/null | grep -c '^sleep$' || true"); strings.TrimSpace(out) != "0" {
		t.Errorf("sleeps left after the command that started one: %q", out)
	}
	h.mu.Lock()
	first := h.p
	h.mu.Unlock()
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the helper outlived the sweep after the last command")
	}
	if err := h.Mkdir(RootWork, "again", 0o755); err != nil {
		t.Fatalf("the next helper: %v", err)
	}
	h.mu.Lock()
	second := h.p
	h.mu.Unlock()
	if second == first {
		t.Fatal("the ended helper process served again")
	}
}

// TestHelperPlain: without a sandbox the helper runs as the kit.
func TestHelperPlain(t *testing.T) {
	dir := t.TempDir()
	ss := Plain()
	ss.dirs = []string{dir}
	defer ss.Close()
	h := helperOf(t, ss)
	f, err := h.Open(RootWork, "plain.txt", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(dir, "plain.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(RootWork, "../x", os.O_RDONLY, 0); !errors.Is(err, ErrOutside) {
		t.Errorf("Open(../x) = %v, want ErrOutside", err)
	}
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// FuzzHelperServe: whatever a request says, the helper changes nothing
// outside its root and never fails to answer.
func FuzzHelperServe(f *testing.F) {
	for _, s := range []string{
		`{"op":"open","path":"a","flags":577,"perm":420}`,
		`{"op":"open","path":"../outside/keep","flags":512}`,
		`{"op":"mkdirall","path":"x/../../y","perm":493}`,
		`{"op":"rename","path":"a","to":"../moved"}`,
		`{"op":"removeall","path":".."}`,
		`{"op":"remove","path":"/"}`,
		`{"op":"watch","path":""}`,
		`{"op":"dial","port":80}`,
		`{"op":"chmod","path":"../outside/keep","perm":511}`,
		`{"op":"chtimes","path":"link/keep","time":1}`,
		`{"op":"nope"}`,
	} {
		f.Add(s)
	}
	base := f.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	os.MkdirAll(root, 0o755)
	os.MkdirAll(outside, 0o755)
	keep := filepath.Join(outside, "keep")
	os.WriteFile(keep, []byte("keep"), 0o644)
	os.Symlink(outside, filepath.Join(root, "link"))
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		f.Fatal(err)
	}
	hs := &helperServer{roots: []int{fd}}
	f.Fuzz(func(t *testing.T, msg string) {
		var req helperReq
		if json.Unmarshal([]byte(msg), &req) != nil {
			return
		}
		_, fds := hs.serve(&req, nil)
		closeFds(fds)
		entries, _ := os.ReadDir(base)
		if len(entries) != 2 {
			t.Fatalf("%s: the base holds %d entries, want root and outside", msg, len(entries))
		}
		if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
			t.Fatalf("%s: the file outside: %q, %v", msg, b, err)
		}
		if out, _ := os.ReadDir(outside); len(out) != 1 {
			t.Fatalf("%s: outside holds %d entries", msg, len(out))
		}
	})
}

// TestHelperChmodChtimes: modes and times set as the session, never
// through a symbolic link.
func TestHelperChmodChtimes(t *testing.T) {
	b := newBox(t, Config{})
	ss, dir := b.session(t, "attrs")
	if out, st := run(t, ss, dir, "echo x > f && ln -s /etc/passwd link && echo ok"); st.Code != 0 {
		t.Fatal(out, st)
	}
	h := helperOf(t, ss)
	if err := h.Chmod(RootWork, "f", 0o640); err != nil {
		t.Fatalf("Chmod: %v", err)
	}
	when := time.Unix(1700000000, 5)
	if err := h.Chtimes(RootWork, "f", when); err != nil {
		t.Fatalf("Chtimes: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil || st.Mode().Perm() != 0o640 || !st.ModTime().Equal(when) {
		t.Errorf("f: %v %v (%v), want 0640 at %v", st.Mode().Perm(), st.ModTime(), err, when)
	}
	if err := h.Chmod(RootWork, "link", 0o777); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Chmod of a link = %v, want refused", err)
	}
	var pw syscall.Stat_t
	syscall.Stat("/etc/passwd", &pw)
	if pw.Mode&0o777 == 0o777 {
		t.Error("/etc/passwd was changed through the link")
	}
	if err := h.Chtimes(RootWork, "link", when); err != nil {
		t.Errorf("Chtimes of a link (its own times): %v", err)
	}
	if err := h.Chmod(RootWork, "../x", 0o777); !errors.Is(err, ErrOutside) {
		t.Errorf("Chmod(../x) = %v, want ErrOutside", err)
	}
}
