package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// call sends method path to the kit with its key and decodes a 2xx JSON
// answer into out.
func (k *realKit) call(t *testing.T, method, path, body string, out any) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(testkit.Context(t, method+" "+path), method, "http://127.0.0.1:"+k.port+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+k.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// TestSnapshotKilled kills -9 a real kit while it takes a snapshot (and
// while a prompt runs), and restarts it on the same state: the snapshot
// acknowledged before the kill is listed and restores whole, the one cut
// short is not listed and left nothing half-written, and a new snapshot
// works.
func TestSnapshotKilled(t *testing.T) {
	key := protocol.NewKey()
	root := t.TempDir()
	manifest := parkingManifest(t, key, "")
	store := filepath.Join(root, "var", "glovebox", "snapshots")
	k := startRealKit(t, key, manifest, root)
	c, hello := k.dial(t)
	sid := hello.SessionID
	// 40 files of 4 MiB, each its own bytes.
	sendPrompt(t, c, "make", `for i in $(seq 40); do (echo $i; head -c 4194304 /dev/zero) > f$i; done; echo made`)
	readUntil(t, c, "complete", "make")
	var first protocol.SnapshotInfo
	if code, body := k.call(t, "POST", "/sessions/"+sid+"/snapshot", "", &first); code != http.StatusCreated {
		t.Fatalf("first snapshot = %d %s", code, body)
	}
	// Every file changes: the next snapshot writes 160 MiB of new blobs.
	sendPrompt(t, c, "change", `for i in $(seq 40); do echo changed >> f$i; done; echo changed`)
	readUntil(t, c, "complete", "change")
	sendPrompt(t, c, "running", `echo started; while [ ! -e go ]; do sleep 0.05; done`)
	waitEvent(t, c, "running", "started")

	answered := make(chan int, 1)
	go func() {
		code, _ := k.call(t, "POST", "/sessions/"+sid+"/snapshot", "", nil)
		answered <- code
	}()
	// Kill once the second snapshot has written a few blobs (into the
	// store's tmp/, where they wait for its manifest) and is writing more.
	testkit.Until(t, "the second snapshot to be midway", func() bool {
		tmp, _ := os.ReadDir(filepath.Join(store, "tmp"))
		return len(tmp) > 5
	})
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k.cmd.Wait()
	if code := testkit.Recv(t, answered, "the cut snapshot's answer"); code == http.StatusCreated {
		t.Fatalf("the second snapshot finished before the kill: nothing was cut short")
	}
	if tmp, _ := os.ReadDir(filepath.Join(store, "tmp")); len(tmp) == 0 {
		t.Fatalf("nothing half-written in the store after the kill: it came too late to test anything")
	}
	manifests, _ := os.ReadDir(filepath.Join(store, "manifests"))
	if len(manifests) != 1 {
		t.Fatalf("%d manifests after the kill, want the first only", len(manifests))
	}

	k2 := startRealKit(t, key, manifest, root)
	if tmp, _ := os.ReadDir(filepath.Join(store, "tmp")); len(tmp) != 0 {
		t.Errorf("the restarted kit left %d half-written files in the store", len(tmp))
	}
	var list protocol.SnapshotList
	if code, body := k2.call(t, "GET", "/snapshots", "", &list); code != 200 || len(list.Snapshots) != 1 || list.Snapshots[0].ID != first.ID {
		t.Fatalf("GET /snapshots after the restart = %d %s, want the first snapshot only", code, body)
	}
	var res protocol.RestoreResult
	if code, body := k2.call(t, "POST", "/snapshots/"+first.ID+"/restore", "", &res); code != http.StatusCreated {
		t.Fatalf("restore after the restart = %d %s", code, body)
	}
	rc, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+k2.port+"/?resume="+res.Session+"&last_seq=0",
		wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if m := readFrame(t, rc); m["type"] != "hello" || m["session_id"] != res.Session {
		t.Fatalf("attach = %v", m)
	}
	sendPrompt(t, rc, "check", `wc -c < f7; head -1 f7`)
	if m := readUntil(t, rc, "complete", "check"); !strings.Contains(m["message"].(string), "4194306") {
		t.Errorf("restored f7: %v, want the first snapshot's 4194306 bytes", m["message"])
	}
	var again protocol.SnapshotInfo
	if code, body := k2.call(t, "POST", "/sessions/"+res.Session+"/snapshot", "", &again); code != http.StatusCreated || again.NewBlobs != 0 || again.Entries != first.Entries {
		t.Errorf("snapshot of the restored session = %d %s, want its %d entries with no new blob (the store holds them all)", code, body, first.Entries)
	}
}

// hostileCall sends method path to a hostile kit with its key.
func (h *hostile) call(t *testing.T, method, path, body string, out any) (int, string) {
	k := &realKit{port: h.port, key: h.key}
	return k.call(t, method, path, body, out)
}

// TestSnapshotPrivsep snapshots and restores a session on a kit that runs
// as root, as in its image: an unprivileged front, sessions with their
// own uids. The session's files are read and written as the session
// (through its helper): a chmod 600 file is kept, a file the session
// itself may not read is left out and said so, links are kept as links,
// the restored files are the new session's own, and their modes and
// modification times are as they were (set by the helper, as the
// session: the front may not).
func TestSnapshotPrivsep(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{})
	c, sid := h.dial("")
	m := promptInputs(t, c, "make", `mkdir -p d/ro && printf secret > d/secret && chmod 600 d/secret && printf open > open && chmod 666 open &&
printf locked > locked && chmod 000 locked && printf in-ro > d/ro/f && chmod 555 d/ro && ln -s /etc/shadow shadow && ln -s d/secret link &&
touch -d @1700000000 open && echo made`, nil)
	if m["type"] != "complete" {
		t.Fatalf("make: %v", m)
	}
	var info protocol.SnapshotInfo
	if code, body := h.call(t, "POST", "/sessions/"+sid+"/snapshot", "", &info); code != http.StatusCreated {
		t.Fatalf("snapshot = %d %s", code, body)
	}
	var man protocol.SnapshotManifest
	h.call(t, "GET", "/snapshots/"+info.ID, "", &man)
	if len(man.Skipped) != 1 || man.Skipped[0].Path != "locked" {
		t.Errorf("skipped = %+v, want locked (mode 000: not even the session reads it)", man.Skipped)
	}
	var res protocol.RestoreResult
	if code, body := h.call(t, "POST", "/snapshots/"+info.ID+"/restore", "", &res); code != http.StatusCreated {
		t.Fatalf("restore = %d %s", code, body)
	}
	t.Logf("restore warnings: %q", res.Warnings)
	rc, rsid := h.dial("?resume=" + res.Session + "&last_seq=0")
	if rsid != res.Session {
		t.Fatalf("attached to %s, want %s", rsid, res.Session)
	}
	m = promptInputs(t, rc, "check", `cat d/secret; echo; cat d/ro/f; echo; stat -c '%a %n' d/secret open d/ro; stat -c '%Y' open; readlink shadow link; ls locked 2>&1 | head -c 0; test "$(stat -c %u d/secret)" = "$(id -u)" && echo mine; touch d/new && echo writable`, nil)
	got, _ := m["message"].(string)
	t.Logf("restored session:\n%s", got)
	if len(res.Warnings) != 0 {
		t.Errorf("restore warnings = %q, want none: the helper sets modes and times as the session", res.Warnings)
	}
	for _, want := range []string{"secret\nin-ro\n600 d/secret\n666 open\n555 d/ro\n1700000000\n", "/etc/shadow\nd/secret\n", "mine\n", "writable"} {
		if !strings.Contains(got, want) {
			t.Errorf("restored session's check lacks %q", want)
		}
	}
}
