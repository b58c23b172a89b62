package kit

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// callInto sends method path with body and decodes a 2xx JSON answer into out.
func (b *box) callInto(method, path string, header http.Header, body string, out any) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.url+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

// text sends method path and returns the status and the body as text.
func (b *box) text(method, path string, header http.Header, body string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.url+path, strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String()
}

func execBox(t testing.TB, opts ...boxOpt) *box {
	return newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), opts...)
}

// message is a prompt's complete message.
func message(t testing.TB, c *v1client, id, text string) string {
	t.Helper()
	c.prompt(id, text)
	m := last(c.finish(id))
	if m["type"] != "complete" {
		t.Fatalf("prompt %s: %v", id, m)
	}
	return m["message"].(string)
}

const sampleWork = `mkdir -p src/empty-dir bin && printf 'hello' > src/a.txt && chmod 600 src/a.txt &&
printf '#!/bin/sh\necho ran\n' > bin/run && chmod 755 bin/run && ln -s /etc/shadow shadow && ln -s src/a.txt link && echo made`

const checkWork = `cat src/a.txt; echo; stat -c '%a %s' src/a.txt bin/run; readlink shadow link; ls -d src/empty-dir; ./bin/run`

const wantCheck = "hello\n600 5\n755 19\n/etc/shadow\nsrc/a.txt\nsrc/empty-dir\nran"

// TestSnapshotRestore snapshots a session, restores it as a new session
// that a client attaches to, and runs a command in it.
func TestSnapshotRestore(t *testing.T) {
	b := execBox(t)
	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	if msg := message(t, c, "1", sampleWork); !strings.Contains(msg, "made") {
		t.Fatalf("sample: %q", msg)
	}
	var info protocol.SnapshotInfo
	if code, body := b.callInto("POST", "/sessions/"+sid+"/snapshot", b.auth(), "", &info); code != http.StatusCreated {
		t.Fatalf("POST snapshot = %d %s", code, body)
	}
	if info.Session != sid || info.Entries != 7 || info.Size != 5+19 || info.NewBlobs != 2 {
		t.Errorf("snapshot info = %+v, want 7 entries of session %s, 24 bytes in 2 new blobs", info, sid)
	}
	var list protocol.SnapshotList
	if code, body := b.callInto("GET", "/snapshots", b.auth(), "", &list); code != 200 || len(list.Snapshots) != 1 || list.Snapshots[0].ID != info.ID {
		t.Fatalf("GET /snapshots = %d %s", code, body)
	}
	var m protocol.SnapshotManifest
	if code, body := b.callInto("GET", "/snapshots/"+info.ID, b.auth(), "", &m); code != 200 || m.Session != sid {
		t.Fatalf("GET /snapshots/ID = %d %s", code, body)
	}

	// Changing the source after the snapshot does not change the restore.
	message(t, c, "2", "echo changed > src/a.txt")
	var res protocol.RestoreResult
	if code, body := b.callInto("POST", "/snapshots/"+info.ID+"/restore", b.auth(), "", &res); code != http.StatusCreated {
		t.Fatalf("restore = %d %s", code, body)
	}
	if res.Session == "" || res.Session == sid || len(res.Warnings) != 0 {
		t.Fatalf("restore = %+v", res)
	}
	rc := b.dial("/?resume="+res.Session+"&last_seq=0", nil)
	if rc.hello["session_id"] != res.Session || rc.hello["resumed"] != true {
		t.Fatalf("attach hello = %v, want session %s resumed", rc.hello, res.Session)
	}
	if got := strings.TrimSpace(message(t, rc, "r1", checkWork)); got != wantCheck {
		t.Errorf("restored session's first command said:\n%s\nwant:\n%s", got, wantCheck)
	}
	if caps, _ := c.hello["capabilities"].([]any); !strings.Contains(strings.Trim(strings.Join(strAll(caps), ","), ","), protocol.CapSnapshots) {
		t.Errorf("hello capabilities %v lack %q", caps, protocol.CapSnapshots)
	}

	// Deleted, it is gone.
	if code, body := b.text("DELETE", "/snapshots/"+info.ID, b.auth(), ""); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	if code, _ := b.text("POST", "/snapshots/"+info.ID+"/restore", b.auth(), ""); code != http.StatusNotFound {
		t.Errorf("restore of a deleted snapshot = %d, want 404", code)
	}
	// Its blobs, which no other snapshot holds, went with it.
	var blobs []string
	filepath.WalkDir(filepath.Join(b.root, DefaultStateDir, "snapshots", "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			blobs = append(blobs, p)
		}
		return nil
	})
	if len(blobs) != 0 {
		t.Errorf("%d blobs left after the only snapshot was deleted", len(blobs))
	}
}

func strAll(xs []any) []string {
	var out []string
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestRestoreRefusedLeavesNothing: a corrupt snapshot and one of another
// image are refused, clearly, and make no session; forced, the other
// image restores with a warning.
func TestRestoreRefusedLeavesNothing(t *testing.T) {
	b := execBox(t, func(m *protocol.Manifest, _ *Options) {
		m.Provenance = &protocol.Provenance{ClosureSHA256: strings.Repeat("a", 64)}
	})
	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	message(t, c, "1", sampleWork)
	var info protocol.SnapshotInfo
	if code, body := b.callInto("POST", "/sessions/"+sid+"/snapshot", b.auth(), "", &info); code != http.StatusCreated {
		t.Fatalf("POST snapshot = %d %s", code, body)
	}
	sessions := b.srv.sessionCount()

	// Another image.
	b.srv.snaps.src.ClosureSHA256 = strings.Repeat("b", 64)
	code, body := b.text("POST", "/snapshots/"+info.ID+"/restore", b.auth(), "")
	if code != http.StatusConflict || !strings.Contains(body, "closure "+strings.Repeat("a", 64)) || !strings.Contains(body, "closure "+strings.Repeat("b", 64)) {
		t.Errorf("restore on another image = %d %q, want 409 naming both closures", code, body)
	}
	var res protocol.RestoreResult
	if code, body := b.callInto("POST", "/snapshots/"+info.ID+"/restore", b.auth(), `{"force":true}`, &res); code != http.StatusCreated || len(res.Warnings) != 1 {
		t.Errorf("forced restore = %d %s, want 201 with a warning", code, body)
	}
	b.srv.snaps.src.ClosureSHA256 = strings.Repeat("a", 64)

	// A blob gone from the store.
	var m protocol.SnapshotManifest
	b.callInto("GET", "/snapshots/"+info.ID, b.auth(), "", &m)
	for _, e := range m.Entries {
		if e.Path == "bin/run" {
			os.Remove(filepath.Join(b.root, DefaultStateDir, "snapshots", "blobs", e.Blob[:2], e.Blob))
		}
	}
	code, body = b.text("POST", "/snapshots/"+info.ID+"/restore", b.auth(), "")
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "missing") {
		t.Errorf("restore with a blob missing = %d %q, want 422 saying it is missing", code, body)
	}
	if n := b.srv.sessionCount(); n != sessions+1 {
		t.Errorf("%d sessions after the refused restores, want %d (the forced one only)", n, sessions+1)
	}
}

// TestSnapshotQuotas: a box's count and size limits answer 409 and 413.
func TestSnapshotQuotas(t *testing.T) {
	b := execBox(t, func(m *protocol.Manifest, _ *Options) {
		m.Snapshots = &protocol.SnapshotsSpec{MaxSnapshots: 1, MaxSize: "10B"}
	})
	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	message(t, c, "1", "printf 12345 > a")
	if code, body := b.text("POST", "/sessions/"+sid+"/snapshot", b.auth(), ""); code != http.StatusCreated {
		t.Fatalf("first snapshot = %d %s", code, body)
	}
	if code, body := b.text("POST", "/sessions/"+sid+"/snapshot", b.auth(), ""); code != http.StatusConflict || !strings.Contains(body, "max_snapshots") {
		t.Errorf("second snapshot = %d %q, want 409 naming max_snapshots", code, body)
	}
	b.srv.snaps.max = 10
	message(t, c, "2", "printf 1234567890 > b")
	if code, body := b.text("POST", "/sessions/"+sid+"/snapshot", b.auth(), ""); code != http.StatusRequestEntityTooLarge {
		t.Errorf("snapshot over max_size = %d %q, want 413", code, body)
	}
}

// TestSnapshotAuth: the session's own credential snapshots it; a
// stranger's does not; /snapshots needs the snapshots scope.
func TestSnapshotAuth(t *testing.T) {
	b := execBox(t)
	alice := b.token(protocol.ScopeConnect)
	c := b.dial("/", bearer(alice))
	sid := c.hello["session_id"].(string)
	message(t, c, "1", "echo x > a")
	for _, tc := range []struct {
		method, path string
		h            http.Header
		want         int
	}{
		{"POST", "/sessions/" + sid + "/snapshot", bearer(alice), http.StatusCreated},
		{"POST", "/sessions/" + sid + "/snapshot", bearer(b.token(protocol.ScopeExec)), http.StatusUnauthorized},
		{"POST", "/sessions/" + sid + "/snapshot", bearer(b.token(protocol.ScopeSnapshots)), http.StatusCreated},
		{"GET", "/snapshots", bearer(alice), http.StatusUnauthorized},
		{"GET", "/snapshots", bearer(b.token(protocol.ScopeSnapshots)), http.StatusOK},
		{"GET", "/snapshots/" + strings.Repeat("0", 64), bearer(b.token(protocol.ScopeAdmin)), http.StatusNotFound},
		{"GET", "/snapshots/../etc", b.auth(), http.StatusNotFound},
		{"PUT", "/snapshots", b.auth(), http.StatusMethodNotAllowed},
		{"GET", "/sessions/" + sid + "/snapshot", b.auth(), http.StatusMethodNotAllowed},
	} {
		if code, body := b.text(tc.method, tc.path, tc.h, ""); code != tc.want {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, code, body, tc.want)
		}
	}
}

// TestSnapshotExcludesOthers: a symlink to another session's directory or
// to the kit's state is stored as a link; nothing of theirs is read.
func TestSnapshotExcludesOthers(t *testing.T) {
	b := execBox(t)
	other := b.dial("/", nil)
	message(t, other, "1", "echo other-secret > secret")
	oinfo, _ := b.srv.live.lookup(other.hello["session_id"].(string)).sandboxed()

	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	message(t, c, "1", "ln -s "+oinfo.Dirs.Work+" other && ln -s "+filepath.Join(b.root, DefaultStateDir)+" state && echo mine > mine")
	var info protocol.SnapshotInfo
	if code, body := b.callInto("POST", "/sessions/"+sid+"/snapshot", b.auth(), "", &info); code != http.StatusCreated {
		t.Fatalf("snapshot = %d %s", code, body)
	}
	var m protocol.SnapshotManifest
	b.callInto("GET", "/snapshots/"+info.ID, b.auth(), "", &m)
	var paths []string
	for _, e := range m.Entries {
		paths = append(paths, e.Root+"/"+e.Path+":"+e.Type)
	}
	if got := strings.Join(paths, " "); got != "work/mine:file work/other:symlink work/state:symlink" {
		t.Errorf("entries = %s, want mine and two links", got)
	}
}

// TestFork forks a session into three while a prompt runs on it: each is
// its own session, with its own directories holding the parent's files,
// and what one does is its own.
func TestFork(t *testing.T) {
	b := execBox(t)
	c := b.dial("/", nil)
	sid := c.hello["session_id"].(string)
	message(t, c, "1", sampleWork)
	// Load: the parent keeps writing while it is forked, until the test
	// makes the file stop.
	c.prompt("busy", "i=0; while [ ! -e stop ]; do echo $i > busy.txt; i=$((i+1)); done; echo busy-done")
	pinfo, _ := b.srv.live.lookup(sid).sandboxed()
	waitFor(t, "the parent's busy loop", func() bool {
		_, err := os.Stat(filepath.Join(pinfo.Dirs.Work, "busy.txt"))
		return err == nil
	})
	var res protocol.ForkResult
	if code, body := b.callInto("POST", "/sessions/"+sid+"/fork", b.auth(), `{"count":3}`, &res); code != http.StatusCreated {
		t.Fatalf("fork = %d %s", code, body)
	}
	if len(res.Sessions) != 3 || res.Method == "" {
		t.Fatalf("fork = %+v, want 3 sessions", res)
	}
	seen := map[string]bool{sid: true}
	for i, id := range res.Sessions {
		if seen[id] {
			t.Fatalf("fork %d has id %s twice", i, id)
		}
		seen[id] = true
		fc := b.dial("/?resume="+id+"&last_seq=0", nil)
		if got := strings.TrimSpace(message(t, fc, "f", checkWork)); got != wantCheck {
			t.Errorf("fork %d's first command said:\n%s\nwant:\n%s", i, got, wantCheck)
		}
		message(t, fc, "w", "echo fork > src/a.txt")
	}
	if err := os.WriteFile(filepath.Join(pinfo.Dirs.Work, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if m := last(c.finish("busy")); m["type"] != "complete" {
		t.Fatalf("busy prompt: %v", m)
	}
	if got := message(t, c, "2", "cat src/a.txt"); got != "hello" {
		t.Errorf("parent's file = %q after the forks wrote theirs", got)
	}
	uids := map[int]bool{pinfo.Sandbox.UID(): true}
	for _, id := range res.Sessions {
		info, _ := b.srv.live.lookup(id).sandboxed()
		if info.Dirs.Work == pinfo.Dirs.Work {
			t.Errorf("fork %s shares the parent's work directory", id)
		}
		if u := info.Sandbox.UID(); u >= 0 {
			if uids[u] {
				t.Errorf("fork %s runs as uid %d, as another session does", id, u)
			}
			uids[u] = true
		}
	}
	t.Logf("uids: %v", uids)
	if code, _ := b.text("POST", "/sessions/"+sid+"/fork", b.auth(), `{"count":100}`); code != http.StatusBadRequest {
		t.Errorf("fork of 100 = %d, want 400", code)
	}
}

// benchWorkspaces are the kit benchmarks' workspaces, made by a prompt:
// BENCHMARKS.md records them.
var benchWorkspaces = []struct{ name, script string }{
	{"1MB", `head -c 1048576 /dev/urandom > f`},
	{"100MB", `for i in $(seq 100); do head -c 1048576 /dev/urandom > f$i; done`},
	{"10000x1KB", `d=0; while [ $d -lt 100 ]; do mkdir d$d; i=0; while [ $i -lt 100 ]; do printf '%01024d' $d$i > d$d/f$i; i=$((i+1)); done; d=$((d+1)); done`},
}

// BenchmarkRestoreToFirstCommand: POST /snapshots/{id}/restore, attach
// (?resume=ID&last_seq=0) and run a first command that reads a restored
// file, through the session's helper and sandbox.
//
// One benchmark per workspace, no sub-benchmarks: newBox's leak check
// would see the parent benchmark's goroutine.
func BenchmarkRestoreToFirstCommand1MB(b *testing.B)   { benchRestore(b, 0) }
func BenchmarkRestoreToFirstCommand100MB(b *testing.B) { benchRestore(b, 1) }
func BenchmarkRestoreToFirstCommand10k(b *testing.B)   { benchRestore(b, 2) }

func benchRestore(b *testing.B, i int) {
	ws := benchWorkspaces[i]
	{
		{
			bx := execBox(b)
			c := bx.dial("/", nil)
			message(b, c, "make", ws.script)
			var info protocol.SnapshotInfo
			if code, body := bx.callInto("POST", "/sessions/"+c.hello["session_id"].(string)+"/snapshot", bx.auth(), "", &info); code != http.StatusCreated {
				b.Fatalf("snapshot = %d %s", code, body)
			}
			b.SetBytes(info.Size)
			b.Logf("workspace: %d entries, %d bytes, %d skipped", info.Entries, info.Size, info.Skipped)
			for b.Loop() {
				var res protocol.RestoreResult
				if code, body := bx.callInto("POST", "/snapshots/"+info.ID+"/restore", bx.auth(), "", &res); code != http.StatusCreated {
					b.Fatalf("restore = %d %s", code, body)
				}
				rc := bx.dial("/?resume="+res.Session+"&last_seq=0", nil)
				message(b, rc, "first", "ls > /dev/null; echo ok")
				b.StopTimer()
				rc.close()
				testkit.Until(b, "the restored session's end", func() bool { return bx.srv.live.lookup(res.Session) == nil })
				b.StartTimer()
			}
		}
	}
}

// BenchmarkFork: POST /sessions/{id}/fork of one session, through both
// sessions' helpers (a copy: no reflinks on this file system).
func BenchmarkFork1MB(b *testing.B)   { benchFork(b, 0) }
func BenchmarkFork100MB(b *testing.B) { benchFork(b, 1) }
func BenchmarkFork10k(b *testing.B)   { benchFork(b, 2) }

func benchFork(b *testing.B, i int) {
	ws := benchWorkspaces[i]
	{
		{
			bx := execBox(b)
			c := bx.dial("/", nil)
			sid := c.hello["session_id"].(string)
			message(b, c, "make", ws.script)
			var method string
			for b.Loop() {
				var res protocol.ForkResult
				if code, body := bx.callInto("POST", "/sessions/"+sid+"/fork", bx.auth(), `{"count":1}`, &res); code != http.StatusCreated {
					b.Fatalf("fork = %d %s", code, body)
				}
				method = res.Method
				b.StopTimer()
				bx.srv.live.lookup(res.Sessions[0]).end(errClosed)
				b.StartTimer()
			}
			b.ReportMetric(0, method)
		}
	}
}

// TestInspectorListsSnapshots: the inspector's API lists the box's
// snapshots as GET /snapshots does, and its page has their list.
func TestInspectorListsSnapshots(t *testing.T) {
	b := execBox(t, withInspector)
	c := b.dial("/", nil)
	message(t, c, "1", "echo x > a")
	var info protocol.SnapshotInfo
	if code, body := b.callInto("POST", "/sessions/"+c.hello["session_id"].(string)+"/snapshot", b.auth(), "", &info); code != http.StatusCreated {
		t.Fatalf("snapshot = %d %s", code, body)
	}
	var l protocol.SnapshotList
	if code, body := b.callInto("GET", "/inspect/api/snapshots", b.auth(), "", &l); code != 200 || len(l.Snapshots) != 1 || l.Snapshots[0].ID != info.ID {
		t.Errorf("GET /inspect/api/snapshots = %d %s", code, body)
	}
	if code, _ := b.text("GET", "/inspect/api/snapshots", nil, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /inspect/api/snapshots without a credential = %d, want 401", code)
	}
	if _, page := b.get("/inspect/", nil); !strings.Contains(string(page), `id="snapshots"`) {
		t.Errorf("the inspector's page has no snapshot list")
	}
}
