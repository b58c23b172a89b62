package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// sessionCgroup returns the pids cgroup directory of session sid of the
// kit process pid, or "" when the kit puts sessions in no v1 pids cgroup.
func sessionCgroup(pid int, sid string) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[1] == "pids" {
			return filepath.Join("/sys/fs/cgroup/pids", parts[2], "glovebox", sid)
		}
	}
	return ""
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// waitLogs waits for lines of the kit's log that contain each of texts, in
// any order, and returns them by text.
func (k *realKit) waitLogs(t *testing.T, texts ...string) map[string]string {
	t.Helper()
	ctx := testkit.Context(t, "the kit to log "+strings.Join(texts, " and "))
	got := map[string]string{}
	for len(got) < len(texts) {
		select {
		case line, ok := <-k.logs:
			if !ok {
				t.Fatalf("the kit's log ended before it said %q", texts)
			}
			for _, text := range texts {
				if _, seen := got[text]; !seen && strings.Contains(line, text) {
					got[text] = line
				}
			}
		case <-ctx.Done():
			t.Fatalf("%v", context.Cause(ctx))
		}
	}
	return got
}

// TestRecoverKilledDuringPrompt kills a real kit with SIGKILL while a
// prompt runs and restarts it on the same state: the dead session's
// directories, its cgroup and its processes are gone, and the boot says
// what it reclaimed.
func TestRecoverKilledDuringPrompt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the session directories and cgroups of a root kit are what this test checks; run as root")
	}
	key := protocol.NewKey()
	root := t.TempDir()
	manifest := parkingManifest(t, key, "")
	k := startRealKit(t, key, manifest, root)
	c, hello := k.dial(t)
	marker := "recover-" + hello.SessionID[:8]
	sendPrompt(t, c, "p1", `: `+marker+`; head -c 8388608 /dev/zero > big.bin; echo started; while [ ! -e go ]; do sleep 0.05; done`)
	waitEvent(t, c, "p1", "started")

	sid := hello.SessionID
	dirs := []string{filepath.Join(root, "work", sid), filepath.Join(root, "input", sid), filepath.Join(root, "output", sid)}
	for _, d := range dirs {
		if !exists(d) {
			t.Fatalf("session directory %s missing before the kill", d)
		}
	}
	cg := sessionCgroup(k.cmd.Process.Pid, sid)
	if cg != "" && !exists(cg) {
		cg = "" // no cgroup layer here
	}
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k.cmd.Wait()
	for _, d := range dirs {
		if !exists(d) {
			t.Fatalf("%s vanished with the kill: nothing left to reclaim", d)
		}
	}

	k2 := startRealKit(t, key, manifest, root)
	line := k2.waitLogs(t, "reclaimed what dead sessions left")["reclaimed what dead sessions left"]
	t.Log(line)
	if !strings.Contains(line, "sessions=1") || !strings.Contains(line, "directories=3") || strings.Contains(line, "bytes=0") {
		t.Errorf("reclaim log %q, want one session, its three directories and their bytes", line)
	}
	if cg != "" && !strings.Contains(line, "cgroups=1") {
		t.Errorf("reclaim log %q, want its cgroup", line)
	}
	for _, d := range dirs {
		if exists(d) {
			t.Errorf("dead session's directory %s survived the restart", d)
		}
	}
	if cg != "" && exists(cg) {
		t.Errorf("dead session's cgroup %s survived the restart", cg)
	} else if cg == "" {
		t.Log("no v1 pids cgroup for sessions here: the cgroup part is not checked")
	}
	if pids := testkit.WithCmdline(marker); len(pids) > 0 {
		t.Errorf("the dead session's processes %v survived the restart", pids)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "var", "glovebox", "sessions")); len(entries) != 0 {
		t.Errorf("session ledger still lists %d sessions", len(entries))
	}
}

// TestRecoverKilledDuringParking kills a real kit with SIGKILL while it
// parks a large output and restarts it: the half-written file in the
// store and the session's directories are gone, and a file parked before
// the kill is still served.
func TestRecoverKilledDuringParking(t *testing.T) {
	key := protocol.NewKey()
	root := t.TempDir()
	manifest := parkingManifest(t, key, "")
	store := filepath.Join(root, "var", "glovebox", "files")
	k := startRealKit(t, key, manifest, root)
	c, _ := k.dial(t)
	sendPrompt(t, c, "keep", `echo kept > "$GLOVEBOX_OUTPUT/kept.txt"`)
	kept := readUntil(t, c, "complete", "keep")["outputs"].(map[string]any)["kept.txt"].(map[string]any)["id"].(string)

	// Catch the store writing a temporary file, then kill. The copy of
	// 256 MiB and its fsync take long enough to be seen; a prompt that
	// finishes parking before it is caught is tried again.
	var tmp string
	for attempt := 0; tmp == "" && attempt < 5; attempt++ {
		id := fmt.Sprintf("big%d", attempt)
		sendPrompt(t, c, id, `head -c 268435456 /dev/zero > "$GLOVEBOX_OUTPUT/big.bin"; echo written`)
		waitEvent(t, c, id, "written")
		// The prompt's end is watched on a goroutine of its own: a read
		// deadline would leave the connection failed for good.
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for {
				b, err := c.ReadMessage()
				if err != nil || strings.Contains(string(b), `"id":"`+id+`"`) && (strings.Contains(string(b), `"type":"complete"`) || strings.Contains(string(b), `"type":"error"`)) {
					return
				}
			}
		}()
		deadline := time.Now().Add(testkit.Timeout)
	watch:
		for tmp == "" && time.Now().Before(deadline) {
			entries, _ := os.ReadDir(store)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".tmp-") {
					tmp = e.Name()
					k.cmd.Process.Signal(syscall.SIGKILL)
					break watch
				}
			}
			select {
			case <-ended:
				break watch // parked before it was seen: again
			case <-time.After(time.Millisecond):
			}
		}
		if tmp == "" {
			testkit.Wait(t, ended, "prompt "+id+" to end")
		}
	}
	if tmp == "" {
		t.Fatal("never caught the store writing a temporary file in 5 attempts")
	}
	k.cmd.Wait()
	if !exists(filepath.Join(store, tmp)) {
		t.Fatalf("the temporary file %s vanished with the kill: nothing left to reclaim", tmp)
	}
	sessionDirs, _ := filepath.Glob(filepath.Join(root, "output", "*"))
	if len(sessionDirs) == 0 {
		t.Fatal("no session directory left by the kill")
	}

	k2 := startRealKit(t, key, manifest, root)
	logs := k2.waitLogs(t, "reclaimed what dead sessions left", "file store swept at boot")
	t.Log(logs["reclaimed what dead sessions left"])
	line := logs["file store swept at boot"]
	t.Log(line)
	if exists(filepath.Join(store, tmp)) {
		t.Errorf("the half-written %s survived the restart", tmp)
	}
	if !strings.Contains(line, "removed=1") {
		t.Errorf("boot sweep log %q, want one file reclaimed", line)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "output", "*")); len(left) != 0 {
		t.Errorf("dead sessions' output directories %v survived the restart", left)
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+k2.port+"/files/"+kept, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "kept\n" {
		t.Errorf("file parked before the kill: %d %q, want 200 \"kept\\n\"", resp.StatusCode, body)
	}
}
