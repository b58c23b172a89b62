package kit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// call sends a request to the box and returns its status and body.
func (b *box) call(method, path string, header http.Header, body string) (int, []byte) {
	b.t.Helper()
	resp, out := b.do(method, path, header, []byte(body))
	return resp.StatusCode, out
}

// doJSON sends a request and decodes its answer into v, failing the test
// unless the status is want.
func (b *box) doJSON(method, path string, body string, want int, v any) {
	b.t.Helper()
	code, out := b.call(method, path, b.auth(), body)
	if code != want {
		b.t.Fatalf("%s %s = %d %s, want %d", method, path, code, out, want)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			b.t.Fatalf("%s %s: %v in %s", method, path, err, out)
		}
	}
}

// term is a test's client of a terminal's WebSocket.
type term struct {
	t      testing.TB
	c      *wsconn.Conn
	out    chan []byte
	ctl    chan protocol.TermControl
	seen   bytes.Buffer
	closed chan struct{}
}

func (b *box) attach(path string, header http.Header) *term {
	b.t.Helper()
	if header == nil {
		header = b.auth()
	}
	c, resp, err := wsconn.Dial(testkit.Context(b.t, "a terminal's handshake"), "ws"+strings.TrimPrefix(b.url, "http")+path, wsconn.DialOptions{Header: header})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		b.t.Fatalf("attach %s: %v (status %d)", path, err, status)
	}
	tm := &term{t: b.t, c: c, out: make(chan []byte, 1024), ctl: make(chan protocol.TermControl, 16), closed: make(chan struct{})}
	go func() {
		defer close(tm.closed)
		defer close(tm.out)
		for {
			binary, data, err := c.ReadFrame()
			if err != nil {
				return
			}
			if binary {
				tm.out <- data
				continue
			}
			var m protocol.TermControl
			if json.Unmarshal(data, &m) == nil {
				tm.ctl <- m
			}
		}
	}()
	b.t.Cleanup(func() { c.Close(); <-tm.closed })
	return tm
}

func (tm *term) send(s string) {
	tm.t.Helper()
	if err := tm.c.WriteBinary([]byte(s)); err != nil {
		tm.t.Fatalf("write to the terminal: %v", err)
	}
}

func (tm *term) control(m protocol.TermControl) {
	tm.t.Helper()
	b, _ := json.Marshal(m)
	if err := tm.c.WriteText(b); err != nil {
		tm.t.Fatalf("write a control frame: %v", err)
	}
}

// until reads the terminal until its output holds want, and drops what
// it read up to there.
func (tm *term) until(want string) {
	tm.t.Helper()
	ctx := testkit.Context(tm.t, "the terminal to print "+want)
	for {
		if i := strings.Index(tm.seen.String(), want); i >= 0 {
			tm.seen.Next(i + len(want))
			return
		}
		select {
		case b, ok := <-tm.out:
			if !ok {
				tm.t.Fatalf("the terminal closed before it printed %q; it printed %q", want, tm.seen.String())
			}
			tm.seen.Write(b)
		case <-ctx.Done():
			tm.t.Fatalf("%v; the terminal printed %q", context.Cause(ctx), tm.seen.String())
		}
	}
}

func (tm *term) exit() protocol.TermControl {
	tm.t.Helper()
	for {
		m := testkit.Recv(tm.t, tm.ctl, "the terminal's exit frame")
		if m.Type == protocol.TermExit {
			return m
		}
	}
}

// A terminal runs its command on a PTY in the session: keystrokes echo,
// stty sees its size and each resize, ^C reaches the foreground process
// and the exit frame carries the command's status.
func TestTerminalEchoResizeInterruptExit(t *testing.T) {
	forSandboxes(t, func(t *testing.T, opt boxOpt) {
		b := newBox(t, scripted(nil), opt)
		c := b.dial("/", nil)
		id := c.hello["session_id"].(string)
		var tinfo protocol.Terminal
		b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["/bin/sh"],"cols":100,"rows":30,"env":{"PS1":"$ "}}`, http.StatusCreated, &tinfo)
		if tinfo.ID == "" || tinfo.State != protocol.ExecRunning || tinfo.Pid == 0 {
			t.Fatalf("POST terminals = %+v, want a running terminal", tinfo)
		}
		tm := b.attach("/sessions/"+id+"/terminals/"+tinfo.ID, nil)
		tm.send("echo hel''lo-$((6*7))\r")
		tm.until("hello-42")
		tm.send("tty; stty size; echo $TERM; pwd\r")
		tm.until("/dev/pts/")
		tm.until("30 100")
		tm.until("xterm-256color")
		ss := b.srv.live.lookup(id)
		info, _ := ss.sandboxed()
		tm.until(info.Dirs.Work)
		tm.control(protocol.TermControl{Type: protocol.TermResize, Cols: 132, Rows: 43})
		tm.send("stty size\r")
		tm.until("43 132")
		tm.send("sleep 1000\r")
		// The foreground process is sleep: ^C typed into the terminal ends
		// it (the line discipline signals the foreground group), not the shell.
		testkit.Until(t, "sleep to run in the terminal", func() bool { return len(testkit.WithCmdline("sleep\x001000")) > 0 })
		tm.send("\x03")
		tm.send("echo after-$?\r")
		tm.until("after-130")
		tm.control(protocol.TermControl{Type: "teleport"})
		if m := testkit.Recv(t, tm.ctl, "the answer to a bad control frame"); m.Type != protocol.TermError || !strings.Contains(m.Message, "teleport") {
			t.Errorf("a bad control frame was answered %+v, want an error naming it", m)
		}
		tm.send("exit 3\r")
		if m := tm.exit(); m.Exit == nil || m.Exit.Code != 3 {
			t.Errorf("exit frame = %+v, want code 3", m)
		}
		testkit.Wait(t, tm.closed, "the box to close the terminal's socket")
		var list []protocol.Terminal
		b.doJSON("GET", "/sessions/"+id+"/terminals", "", http.StatusOK, &list)
		if len(list) != 1 || list[0].State != protocol.ExecExited || list[0].Exit.Code != 3 || list[0].Cols != 132 {
			t.Errorf("GET terminals = %+v, want the one, exited with 3, 132 columns", list)
		}
	})
}

// Several terminals run at once, each its own.
func TestTerminalsSeveralAtOnce(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	var terms []*term
	for range 3 {
		var ti protocol.Terminal
		b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["/bin/sh"]}`, http.StatusCreated, &ti)
		terms = append(terms, b.attach("/sessions/"+id+"/terminals/"+ti.ID, nil))
	}
	for i, tm := range terms {
		tm.send("echo term-$((" + string(rune('0'+i)) + "+100))\r")
	}
	for i, tm := range terms {
		tm.until("term-10" + string(rune('0'+i)))
	}
	// A second client cannot take an attached terminal.
	code, _ := b.call("GET", "/sessions/"+id+"/terminals/t1", http.Header{
		"Authorization": {"Bearer " + b.key}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="},
	}, "")
	if code != http.StatusConflict {
		t.Errorf("attaching t1 twice = %d, want 409", code)
	}
}

// A terminal nobody reads stops being read: its output queue fills, the
// kit reads its PTY no further, and its command blocks instead of
// growing the kit's memory. A client that attaches and never reads is
// the same: the socket's buffers fill, then the queue.
func TestTerminalNobodyReadsIsBounded(t *testing.T) {
	forSandboxes(t, func(t *testing.T, opt boxOpt) {
		b := newBox(t, scripted(nil), opt)
		c := b.dial("/", nil)
		id := c.hello["session_id"].(string)
		var ti protocol.Terminal
		// 64 MiB, far more than the queue, the PTY and the sockets hold.
		b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["/bin/sh","-c","head -c 67108864 /dev/zero | tr '\\0' x; echo done"]}`, http.StatusCreated, &ti)
		tmn, _ := newTerminalsOf(b, id, ti.ID)
		testkit.Until(t, "the terminal's output queue to fill", func() bool { return len(tmn.out) == cap(tmn.out) })
		if ended(tmn.proc) != nil {
			t.Fatal("the command ended: its 64 MiB were read although nobody read the terminal")
		}
		// A client that never reads.
		hdr := b.auth()
		cn, _, err := wsconn.Dial(testkit.Context(t, "attach"), "ws"+strings.TrimPrefix(b.url, "http")+"/sessions/"+id+"/terminals/"+ti.ID, wsconn.DialOptions{Header: hdr})
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close()
		testkit.Until(t, "the queue to fill again behind the silent client", func() bool { return len(tmn.out) == cap(tmn.out) && tmn.info().Attached })
		if ended(tmn.proc) != nil {
			t.Fatal("the command ended: its 64 MiB were read although the client read none")
		}
		b.doJSON("DELETE", "/sessions/"+id+"/terminals/"+ti.ID, "", http.StatusNoContent, nil)
		testkit.Wait(t, tmn.proc.Done(), "the deleted terminal's command to end")
	})
}

// newTerminalsOf finds a terminal in the box's table.
func newTerminalsOf(b *box, sid, tid string) (*terminal, bool) {
	return b.srv.terms.table.get(b.srv.live.lookup(sid), tid)
}

// Only the session's own credential, the exec scope or admin reach its
// terminals and processes: another owner's gets 404, a token of another
// scope 401.
func TestExecAuth(t *testing.T) {
	b := newBox(t, scripted(nil))
	mint := b.tokenFor
	alice := mint("alice", protocol.ScopeConnect)
	c := b.dial("/", bearer(alice))
	id := c.hello["session_id"].(string)
	bob := bearer(mint("bob", protocol.ScopeConnect))
	for _, p := range []string{"/terminals", "/processes"} {
		body := `{"command":["true"]}`
		if code, out := b.call("POST", "/sessions/"+id+p, bob, body); code != http.StatusNotFound {
			t.Errorf("bob POST %s = %d %s, want 404", p, code, out)
		}
		if code, _ := b.call("POST", "/sessions/"+id+p, bearer(mint("", protocol.ScopeWorkspace)), body); code != http.StatusUnauthorized {
			t.Errorf("a workspace token POST %s = %d, want 401", p, code)
		}
		if code, out := b.call("POST", "/sessions/"+id+p, bearer(alice), body); code != http.StatusCreated {
			t.Errorf("alice POST %s = %d %s, want 201", p, code, out)
		}
		if code, out := b.call("GET", "/sessions/"+id+p, bearer(mint("", protocol.ScopeExec)), ""); code != http.StatusOK {
			t.Errorf("an exec token GET %s = %d %s, want 200", p, code, out)
		}
		if code, _ := b.call("GET", "/sessions/"+id+p+"/"+p[1:2]+"1", bob, ""); code != http.StatusNotFound {
			t.Errorf("bob GET %s/1 = %d, want 404", p, code)
		}
	}
	if _, resp, err := wsconn.Dial(testkit.Context(t, "attach"), "ws"+strings.TrimPrefix(b.url, "http")+"/sessions/"+id+"/terminals/t1", wsconn.DialOptions{Header: bob}); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob attaching = %v, want 404", err)
	}
}

// Bad requests get a clear 4xx and start nothing.
func TestExecBadRequests(t *testing.T) {
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.MaxProcesses = 2 })
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	for _, tc := range []struct {
		method, path, body string
		want               int
		msg                string
	}{
		{"POST", "/processes", `{}`, 400, "needs a command"},
		{"POST", "/processes", `{"command":["true"],"dir":"../../etc"}`, 400, "outside the session's directories"},
		{"POST", "/processes", `{"command":["/no/such/program"]}`, 400, "no/such/program"},
		{"POST", "/processes", `{"command":["true"],"env":{"A B":"1"}}`, 400, `"A B"`},
		{"POST", "/terminals", `{"cols":99999}`, 400, "cols and rows"},
		{"PUT", "/terminals", ``, 405, "GET, POST"},
		{"GET", "/terminals/t9", ``, 404, "no terminal t9"},
		{"GET", "/processes/p9/output", ``, 404, "no process p9"},
		{"GET", "/terminals/t1/x", ``, 404, "no such terminal route"},
	} {
		code, out := b.call(tc.method, "/sessions/"+id+tc.path, b.auth(), tc.body)
		if code != tc.want || !strings.Contains(string(out), tc.msg) {
			t.Errorf("%s %s %s = %d %q, want %d with %q", tc.method, tc.path, tc.body, code, out, tc.want, tc.msg)
		}
	}
	for range 2 {
		b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["sleep","1000"]}`, http.StatusCreated, nil)
	}
	if code, out := b.call("POST", "/sessions/"+id+"/processes", b.auth(), `{"command":["sleep","1000"]}`); code != http.StatusTooManyRequests || !strings.Contains(string(out), "DELETE") {
		t.Errorf("a third process of 2 = %d %q, want 429 saying to DELETE one", code, out)
	}
}

// A process runs in the session's work directory with its environment;
// its stdin takes a streamed body, its output pages by absolute offsets
// and follows until it ends, with its exit status.
func TestProcessStdinOutputFollow(t *testing.T) {
	forSandboxes(t, func(t *testing.T, opt boxOpt) {
		b := newBox(t, scripted(nil), opt)
		c := b.dial("/", nil)
		id := c.hello["session_id"].(string)
		var p protocol.Process
		b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["/bin/sh","-c","echo pwd=$(pwd) home=$HOME x=$X; echo to-stderr >&2; tr a-z A-Z; exit 5"],"env":{"X":"ex"}}`, http.StatusCreated, &p)
		if p.ID != "p1" || p.State != protocol.ExecRunning {
			t.Fatalf("POST processes = %+v", p)
		}
		base := "/sessions/" + id + "/processes/" + p.ID
		b.doJSON("POST", base+"/stdin", "hello ", http.StatusNoContent, nil)
		b.doJSON("POST", base+"/stdin?close=1", "world\n", http.StatusNoContent, nil)
		code, out := b.call("GET", base+"/output?stream=stdout&follow=1", b.auth(), "")
		if code != http.StatusOK {
			t.Fatalf("follow = %d %s", code, out)
		}
		var all []byte
		var last protocol.ProcessOutput
		for line := range strings.Lines(string(out)) {
			if err := json.Unmarshal([]byte(line), &last); err != nil {
				t.Fatalf("follow line %q: %v", line, err)
			}
			data, _ := base64.StdEncoding.DecodeString(last.Data)
			all = append(all, data...)
		}
		ss := b.srv.live.lookup(id)
		info, _ := ss.sandboxed()
		want := "pwd=" + info.Dirs.Work + " home=" + info.Dirs.Work + " x=ex\nHELLO WORLD\n"
		if string(all) != want {
			t.Errorf("followed stdout = %q, want %q", all, want)
		}
		if !last.EOF || last.Exit == nil || last.Exit.Code != 5 || last.Next != int64(len(want)) {
			t.Errorf("last line = %+v, want eof at %d with exit code 5", last, len(want))
		}
		var page protocol.ProcessOutput
		b.doJSON("GET", base+"/output?stream=stderr", "", http.StatusOK, &page)
		if data, _ := base64.StdEncoding.DecodeString(page.Data); string(data) != "to-stderr\n" || !page.EOF {
			t.Errorf("stderr page = %+v (%q), want to-stderr and eof", page, data)
		}
		page = protocol.ProcessOutput{}
		b.doJSON("GET", base+"/output?offset=4&limit=3", "", http.StatusOK, &page)
		if data, _ := base64.StdEncoding.DecodeString(page.Data); string(data) != want[4:7] || page.Offset != 4 || page.Next != 7 || page.EOF {
			t.Errorf("a page at 4 of 3 = %+v (%q), want %q", page, data, want[4:7])
		}
		code, out = b.call("POST", base+"/stdin", b.auth(), "more")
		if code != http.StatusConflict {
			t.Errorf("stdin after close = %d %s, want 409", code, out)
		}
	})
}

// A process that floods its output costs the kit one ring per stream: it
// keeps the latest bytes and says how many it dropped.
func TestProcessFloodIsBounded(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	const total = 48 << 20
	var p protocol.Process
	b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["/bin/sh","-c","head -c 50331648 /dev/zero; printf end"]}`, http.StatusCreated, &p)
	base := "/sessions/" + id + "/processes/" + p.ID
	testkit.Until(t, "the flood to end", func() bool {
		b.doJSON("GET", base, "", http.StatusOK, &p)
		return p.State == protocol.ExecExited
	})
	if p.Stdout != total+3 {
		t.Errorf("stdout = %d bytes, want %d", p.Stdout, total+3)
	}
	var page protocol.ProcessOutput
	b.doJSON("GET", base+"/output?offset=0&limit=1048576", "", http.StatusOK, &page)
	data, _ := base64.StdEncoding.DecodeString(page.Data)
	if page.Dropped != total+3-procRing || page.Offset != page.Dropped || len(data) != procRing || !strings.HasSuffix(string(data), "end") || !page.EOF {
		t.Errorf("page from 0 = offset %d dropped %d, %d bytes, eof %v; want the last %d bytes, %d dropped", page.Offset, page.Dropped, len(data), page.EOF, procRing, total+3-procRing)
	}
	p1, _ := b.srv.procs.table.get(b.srv.live.lookup(id), p.ID)
	if n := cap(p1.streams[0].buf); n > procRing {
		t.Errorf("the stdout ring holds %d bytes, want at most %d", n, procRing)
	}
}

// Signals reach a process; DELETE stops and forgets it.
func TestProcessSignalAndDelete(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	var p protocol.Process
	b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["/bin/sh","-c","trap 'echo usr1; exit 9' USR1; echo ready; while :; do sleep 0.05; done"]}`, http.StatusCreated, &p)
	base := "/sessions/" + id + "/processes/" + p.ID
	testkit.Until(t, "the process to be ready", func() bool {
		var page protocol.ProcessOutput
		b.doJSON("GET", base+"/output", "", http.StatusOK, &page)
		return page.Next > 0
	})
	if code, out := b.call("POST", base+"/signal", b.auth(), `{"signal":"SIGSEGV"}`); code != http.StatusBadRequest {
		t.Errorf("SIGSEGV = %d %s, want 400", code, out)
	}
	b.doJSON("POST", base+"/signal", `{"signal":"SIGUSR1"}`, http.StatusNoContent, nil)
	testkit.Until(t, "the process to exit on SIGUSR1", func() bool {
		b.doJSON("GET", base, "", http.StatusOK, &p)
		return p.State == protocol.ExecExited
	})
	if p.Exit.Code != 9 {
		t.Errorf("exit = %+v, want 9 from the USR1 trap", p.Exit)
	}
	b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["sleep","1000"]}`, http.StatusCreated, &p)
	b.doJSON("DELETE", "/sessions/"+id+"/processes/"+p.ID, "", http.StatusNoContent, nil)
	var list []protocol.Process
	b.doJSON("GET", "/sessions/"+id+"/processes", "", http.StatusOK, &list)
	if len(list) != 1 || list[0].ID != "p1" {
		t.Errorf("GET processes after DELETE p2 = %+v, want p1 only", list)
	}
	if alive(p.Pid) {
		t.Errorf("the deleted process %d still runs", p.Pid)
	}
}

// Terminals and processes end with their session: nothing of theirs is
// left running, and their sockets and streams close.
func TestExecEndsWithTheSession(t *testing.T) {
	forSandboxes(t, func(t *testing.T, opt boxOpt) {
		b := newBox(t, scripted(nil), opt)
		c := b.dial("/", nil)
		id := c.hello["session_id"].(string)
		var ti protocol.Terminal
		b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["/bin/sh","-c","sleep 1000 & sleep 1000"]}`, http.StatusCreated, &ti)
		tm := b.attach("/sessions/"+id+"/terminals/"+ti.ID, nil)
		var p protocol.Process
		b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["/bin/sh","-c","setsid sleep 1000 & exec sleep 1000"]}`, http.StatusCreated, &p)
		testkit.Until(t, "the session's four sleeps", func() bool { return len(testkit.WithCmdline("sleep\x001000")) >= 4 })
		ss := b.srv.live.lookup(id)
		ss.end(errClosed)
		testkit.Wait(t, tm.closed, "the terminal's socket to close with the session")
		testkit.Until(t, "every process of the session to end", func() bool {
			return !alive(ti.Pid) && !alive(p.Pid) && len(testkit.WithCmdline("sleep\x001000")) == 0
		})
		if code, _ := b.call("GET", "/sessions/"+id+"/processes", b.auth(), ""); code != http.StatusNotFound {
			t.Errorf("GET processes of an ended session = %d, want 404", code)
		}
	})
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !bytes.Contains(stat, []byte(") Z ")) && !bytes.Contains(stat, []byte(") X "))
}

// forSandboxes runs a test with the full sandbox (as CI runs the kit,
// as root) and with the sandbox off.
func forSandboxes(t *testing.T, f func(t *testing.T, opt boxOpt)) {
	t.Run("sandboxed", func(t *testing.T) { f(t, func(*protocol.Manifest, *Options) {}) })
	t.Run("off", func(t *testing.T) {
		f(t, func(m *protocol.Manifest, _ *Options) {
			m.Sandbox = &protocol.SandboxSpec{Enabled: new(false), AllowDegraded: true}
		})
	})
}

// Input nobody reads blocks its writer (a terminal's client, a process's
// stdin request), holds nothing in the kit, and ends with the session.
func TestExecFloodedInputEndsWithTheSession(t *testing.T) {
	b := newBox(t, scripted(nil))
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	var ti protocol.Terminal
	b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["sleep","1000"]}`, http.StatusCreated, &ti)
	tm := b.attach("/sessions/"+id+"/terminals/"+ti.ID, nil)
	typed := make(chan error, 1)
	go func() {
		line := append(bytes.Repeat([]byte("y"), 1000), '\r')
		for {
			if err := tm.c.WriteBinary(line); err != nil {
				typed <- err
				return
			}
		}
	}()
	var p protocol.Process
	b.doJSON("POST", "/sessions/"+id+"/processes", `{"command":["sleep","1000"]}`, http.StatusCreated, &p)
	fed := make(chan int, 1)
	go func() {
		// 64 MiB to a stdin nobody reads: the request blocks.
		req, _ := http.NewRequest("POST", b.url+"/sessions/"+id+"/processes/"+p.ID+"/stdin", io.LimitReader(zeros{}, 64<<20))
		req.Header = b.auth()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fed <- -1
			return
		}
		resp.Body.Close()
		fed <- resp.StatusCode
	}()
	testkit.Until(t, "both sleeps", func() bool { return len(testkit.WithCmdline("sleep\x001000")) >= 2 })
	ss := b.srv.live.lookup(id)
	proc, _ := b.srv.procs.table.get(ss, p.ID)
	testkit.Until(t, "the stdin request to be writing", func() bool {
		if proc.stdinMu.TryLock() {
			proc.stdinMu.Unlock()
			return false
		}
		return true
	})
	ss.end(errClosed)
	if code := testkit.Recv(t, fed, "the blocked stdin request to end with the session"); code != http.StatusConflict {
		t.Errorf("the blocked stdin request = %d, want 409 (its process ended)", code)
	}
	testkit.Recv(t, typed, "the flooding terminal client to be cut off")
	testkit.Until(t, "the session's processes to end", func() bool { return len(testkit.WithCmdline("sleep\x001000")) == 0 })
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A session at its most terminals drops its oldest ended one for a new
// one, and ends it: its PTY is closed (and the goroutine that read it
// goes), not left behind with no way to reach it.
func TestEvictedTerminalIsEnded(t *testing.T) {
	b := newBox(t, scripted(nil), func(_ *protocol.Manifest, o *Options) { o.MaxTerminals = 1 })
	c := b.dial("/", nil)
	id := c.hello["session_id"].(string)
	var t1 protocol.Terminal
	b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["/bin/sh","-c","exit 0"]}`, http.StatusCreated, &t1)
	old, ok := newTerminalsOf(b, id, t1.ID)
	if !ok {
		t.Fatal("no first terminal")
	}
	testkit.Until(t, "the first terminal's command to end", func() bool { return ended(old.proc) != nil })
	var t2 protocol.Terminal
	b.doJSON("POST", "/sessions/"+id+"/terminals", `{"command":["/bin/sh"]}`, http.StatusCreated, &t2)
	if _, still := newTerminalsOf(b, id, t1.ID); still {
		t.Fatal("the ended terminal was not dropped for the new one")
	}
	if old.master.Fd() != ^uintptr(0) {
		t.Error("the dropped terminal's PTY is still open")
	}
}
