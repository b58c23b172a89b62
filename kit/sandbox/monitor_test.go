//go:build linux

package sandbox

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// frontGID is the group of the test's front: any gid no session has.
const frontGID = 199999

// monitorBox is a monitor serving a sandbox whose sessions' directories
// are made under <root>/{work,input,output}, its state in <root>/state,
// and the raw end of its socket, on which the test plays the front.
type monitorBox struct {
	root string
	sb   *Sandbox
	conn *net.UnixConn
	id   uint64
}

func newMonitorBox(t *testing.T, cfg Config) *monitorBox {
	t.Helper()
	b := newBox(t, Config{}) // root, state, secret; its sandbox is unused
	b.sb.Close()
	var roots []string
	for _, d := range []string{"work", "input", "output"} {
		p := filepath.Join(b.root, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		roots = append(roots, p)
	}
	cfg.Hide = append(cfg.Hide, b.state)
	cfg.Hide = append(cfg.Hide, roots...)
	cfg.SessionRoots = roots
	cfg.FrontGID = frontGID
	cfg.TmpRoot = filepath.Join(b.state, "tmp")
	sb, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		NewMonitor(sb).Serve(os.NewFile(uintptr(pair[0]), "monitor"))
	}()
	f := os.NewFile(uintptr(pair[1]), "front")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	mb := &monitorBox{root: b.root, sb: sb, conn: fc.(*net.UnixConn)}
	t.Cleanup(func() {
		mb.conn.Close()
		<-served
		sb.Close()
	})
	return mb
}

// raw sends one request as the front would write it and returns the
// reply.
func (mb *monitorBox) raw(t *testing.T, req string) monReply {
	t.Helper()
	if _, err := mb.conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	mb.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*8))
	n, oobn, _, _, err := mb.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatalf("no reply to %s: %v", req, err)
	}
	closeFds(rightsIn(oob[:oobn]))
	var r monReply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		t.Fatalf("reply to %s: %v", req, err)
	}
	return r
}

// req sends a request made of fields.
func (mb *monitorBox) req(t *testing.T, fields map[string]any) monReply {
	t.Helper()
	mb.id++
	fields["id"] = mb.id
	b, _ := json.Marshal(fields)
	return mb.raw(t, string(b))
}

// snapshot lists every file under root with its owner, group and mode,
// and the same of each of extra.
func snapshot(t *testing.T, root string, extra ...string) string {
	t.Helper()
	var lines []string
	add := func(p string) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			lines = append(lines, p+" "+err.Error())
			return
		}
		lines = append(lines, fmt.Sprintf("%s %d:%d %o %d", p, st.Uid, st.Gid, st.Mode, st.Size))
	}
	filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		add(p)
		return nil
	})
	for _, p := range extra {
		add(p)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestMonitorRefuses plays a front whose parser a client took over: over
// the monitor's real socket, it asks for what lies outside the monitor's
// interface, and every request is refused with nothing changed on disk.
func TestMonitorRefuses(t *testing.T) {
	mb := newMonitorBox(t, Config{})
	a := fmt.Sprintf("a%d", time.Now().UnixNano())
	b := fmt.Sprintf("b%d", time.Now().UnixNano())
	for _, id := range []string{a, b} {
		if r := mb.req(t, map[string]any{"op": "open", "session": id}); r.Error != "" {
			t.Fatalf("open %s: %s", id, r.Error)
		}
	}
	input := func(id string) string { return filepath.Join(mb.root, "input", id) }
	// What a front can plant in a session's input directory, which it
	// writes through its group: links to another session's files and to
	// the system's, and a hard link to a file outside.
	if err := os.WriteFile(filepath.Join(input(b), "mine"), []byte("b's"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(mb.root, "outside")
	if err := os.WriteFile(outside, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"to-other": filepath.Join(input(b), "mine"),
		"to-etc":   "/etc/passwd",
		"dir-link": input(b),
	} {
		if err := os.Symlink(target, filepath.Join(input(a), name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(outside, filepath.Join(input(a), "hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(input(a), "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, mb.root, "/etc/passwd", "/etc")

	for _, c := range []struct {
		name string
		req  string
	}{
		{"another session's directory", `{"op":"chown","session":"` + a + `","dir":"input","path":"../` + b + `/mine"}`},
		{"a symbolic link to another session's file", `{"op":"chown","session":"` + a + `","dir":"input","path":"to-other"}`},
		{"a symbolic link to /etc", `{"op":"chown","session":"` + a + `","dir":"input","path":"to-etc"}`},
		{"through a linked directory", `{"op":"chown","session":"` + a + `","dir":"input","path":"dir-link/mine"}`},
		{"a hard link to a file outside", `{"op":"chown","session":"` + a + `","dir":"input","path":"hard"}`},
		{"a directory", `{"op":"chown","session":"` + a + `","dir":"input","path":"sub"}`},
		{"out of the state directory", `{"op":"chown","session":"` + a + `","dir":"input","path":"../../state/secret"}`},
		{"an absolute path", `{"op":"chown","session":"` + a + `","dir":"input","path":"/etc/passwd"}`},
		{"an unclean path", `{"op":"chown","session":"` + a + `","dir":"input","path":"sub/../../` + b + `/mine"}`},
		{"a directory that is not the session's", `{"op":"chown","session":"` + a + `","dir":"state","path":"secret"}`},
		{"an arbitrary uid", `{"op":"chown","session":"` + a + `","dir":"input","path":"sub","uid":0}`},
		{"an arbitrary gid on open", `{"op":"open","session":"c1","gid":0}`},
		{"a path on open", `{"op":"open","session":"c2","path":"/etc"}`},
		{"an unknown op", `{"op":"exec","session":"` + a + `","path":"/bin/sh"}`},
		{"no op", `{"session":"` + a + `"}`},
		{"a session id with a slash", `{"op":"clear","session":"../` + b + `"}`},
		{"a session id that is a path", `{"op":"open","session":"/etc"}`},
		{"an empty session id", `{"op":"usage","session":""}`},
		{"a session that is not open", `{"op":"clear","session":"nosuch"}`},
		{"reclaiming a live session", `{"op":"reclaim","session":"` + b + `"}`},
		{"opening a session twice", `{"op":"open","session":"` + a + `"}`},
		{"two values", `{"op":"hello"}{"op":"hello"}`},
		{"not JSON", `chown /etc/passwd`},
		{"a listener on a host name", `{"op":"supervise","session":"` + a + `","proxy_addr":"evil.example:80"}`},
	} {
		r := mb.raw(t, c.req)
		if !strings.Contains(r.Error, "refused") {
			t.Errorf("%s: %s = %+v, want a refusal", c.name, c.req, r)
		}
	}
	if after := snapshot(t, mb.root, "/etc/passwd", "/etc"); after != before {
		t.Errorf("the refused requests changed files:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The one thing chown may do: give the session a plain file the
	// front wrote at the top of its input directory.
	if err := os.WriteFile(filepath.Join(input(a), "in.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mb.req(t, map[string]any{"op": "chown", "session": a, "dir": "input", "path": "in.txt"}); r.Error != "" {
		t.Fatalf("chown of a plain input: %s", r.Error)
	}
	var st syscall.Stat_t
	syscall.Stat(input(a), &st)
	uid := st.Uid
	syscall.Stat(filepath.Join(input(a), "in.txt"), &st)
	if st.Uid != uid || uid < DefaultUIDBase {
		t.Errorf("the input is owned by %d, want the session's uid %d", st.Uid, uid)
	}
}

// TestMonitorSessionDirectories: a session's directories are its uid's,
// group the front's, mode 02770; other sessions' uids cannot reach them;
// clear, usage and close do what they say.
func TestMonitorSessionDirectories(t *testing.T) {
	mb := newMonitorBox(t, Config{})
	id := fmt.Sprintf("d%d", time.Now().UnixNano())
	r := mb.req(t, map[string]any{"op": "open", "session": id})
	if r.Error != "" || len(r.Dirs) != 3 {
		t.Fatalf("open = %+v", r)
	}
	for _, d := range r.Dirs {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			t.Fatal(err)
		}
		if int(st.Uid) != r.UID || st.Gid != frontGID || st.Mode&0o7777 != 0o2770 {
			t.Errorf("%s: %d:%d %o, want %d:%d 2770", d, st.Uid, st.Gid, st.Mode&0o7777, r.UID, frontGID)
		}
	}
	work := r.Dirs[0]
	if err := os.MkdirAll(filepath.Join(work, "deep", "er"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "deep", "er", "f"), make([]byte, 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := mb.req(t, map[string]any{"op": "usage", "session": id}); r.Error != "" || r.Used != 1000 {
		t.Errorf("usage = %+v, want 1000 bytes", r)
	}
	if r := mb.req(t, map[string]any{"op": "clear", "session": id}); r.Error != "" {
		t.Fatalf("clear: %s", r.Error)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("the work directory holds %d entries after clear", len(entries))
	}
	if r := mb.req(t, map[string]any{"op": "close", "session": id}); r.Error != "" {
		t.Fatalf("close: %s", r.Error)
	}
	for _, d := range r.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s after close: %v, want it gone", d, err)
		}
	}
}

// TestFrontRunsSessionsThroughTheMonitor: a front's sandbox (Dial) runs
// a session's commands under its uid, in the sandbox the monitor set up,
// and its supervisor talks to the front directly.
func TestFrontRunsSessionsThroughTheMonitor(t *testing.T) {
	b := newBox(t, Config{})
	b.sb.Close()
	work := filepath.Join(b.root, "work")
	sb, err := New(Config{Hide: []string{b.state, work}, SessionRoots: []string{work, "", ""}, FrontGID: frontGID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		NewMonitor(sb).Serve(os.NewFile(uintptr(pair[0]), "monitor"))
	}()
	front, err := Dial(os.NewFile(uintptr(pair[1]), "front"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		front.Close()
		<-served
	}()
	if !front.Report().Has(LayerUsers) || !front.Remote() {
		t.Fatalf("the front's report = %v (remote %v), want the monitor's, with users", front.Report(), front.Remote())
	}
	id := fmt.Sprintf("f%d", time.Now().UnixNano())
	ss, err := front.OpenSession(id)
	if err != nil {
		t.Fatal(err)
	}
	dir := ss.Dirs()[0]
	out, st := run(t, ss, dir, "id -u; echo made > made.txt; cat "+filepath.Join(b.state, "secret")+" 2>&1; true")
	if st.Code != 0 || !strings.HasPrefix(out, fmt.Sprint(ss.UID())+"\n") || strings.Contains(out, "box key") {
		t.Errorf("the command printed %q (%s), want the session's uid %d and no secret", out, st, ss.UID())
	}
	if got, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(got) != "made\n" {
		t.Errorf("the command's file: %q, %v", got, err)
	}
	// The session helper serves a front's session too, as the session.
	h, err := ss.Helper()
	if err != nil {
		t.Fatalf("Helper: %v", err)
	}
	f, err := h.Open(RootWork, "via-helper", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatalf("the helper's Open: %v", err)
	}
	var hst unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &hst); err != nil || int(hst.Uid) != ss.UID() {
		t.Errorf("the helper's file is uid %d's (%v), want the session's %d", hst.Uid, err, ss.UID())
	}
	f.Close()
	// Paused and woken through the monitor, which holds the cgroup.
	if front.Report().Has(LayerCgroup) {
		if err := ss.Pause(); err != nil {
			t.Fatalf("Pause through the monitor: %v", err)
		}
		if out, st := run(t, ss, dir, "echo woken"); st.Code != 0 || out != "woken\n" || ss.Paused() {
			t.Errorf("a command on the paused session: %q %v (paused %v)", out, st, ss.Paused())
		}
	}
	// The monitor measures: the file's 5 bytes, and what the session's
	// private /tmp holds.
	if used, err := ss.DiskUsed(); err != nil || used < 5 {
		t.Errorf("DiskUsed = %d, %v; want at least 5", used, err)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the session's directory after Close: %v, want it gone", err)
	}
}

// FuzzDecodeRequest: no request crashes the decoder, and one it accepts
// names a valid session and, for chown, a plain relative path below one
// of the session's directories.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"hello"}`,
		`{"id":1,"op":"open","session":"abc"}`,
		`{"op":"chown","session":"a","dir":"input","path":"x"}`,
		`{"op":"chown","session":"a","dir":"input","path":"../b/x"}`,
		`{"op":"supervise","session":"a","confine_net":true,"egress_port":3128,"proxy_addr":"127.0.0.1:3128","listener":true}`,
		`{"op":"chown","session":"a","dir":"input","path":"x","uid":0}`,
		`{"op":"usage","session":"a"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		if r.Op != opHello && !validID(r.Session) {
			t.Fatalf("accepted %q with session %q", b, r.Session)
		}
		if r.Op == opChown && (filepath.IsAbs(r.Path) || !filepath.IsLocal(r.Path) || filepath.Clean(r.Path) != r.Path) {
			t.Fatalf("accepted %q with path %q", b, r.Path)
		}
		if r.Op != opChown && (r.Path != "" || r.Dir != "") {
			t.Fatalf("accepted %q: a path with op %q", b, r.Op)
		}
	})
}
