package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestPrivilegeSeparation runs the kit as root, as in its image: the
// process that serves HTTP is the kit user (just below the sessions'
// uids) with no capability in any set, while prompts still get their
// inputs, return their outputs (but those their agent made unreadable),
// clear their workspace, trip the disk limit, and stay out of each
// other's files.
func TestPrivilegeSeparation(t *testing.T) {
	h := startHostile(t, nil, protocol.Limits{Disk: "2MB"})
	server := listenerPid(t, h.port)
	if server == h.pid {
		t.Fatalf("the kit's own process (pid %d) serves HTTP, want its unprivileged front", h.pid)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", server))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Uid": "199999\t199999\t199999\t199999", "Gid": "199999\t199999\t199999\t199999", "Groups": "",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1",
	}
	for line := range strings.Lines(string(status)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if w, ok := want[k]; ok {
			if got := strings.TrimSpace(v); got != w {
				t.Errorf("the serving process's %s: %q, want %q", k, got, w)
			}
			delete(want, k)
		}
	}
	if len(want) > 0 {
		t.Errorf("/proc/%d/status lacks %v", server, want)
	}
	if iso := h.isolation(); !strings.Contains(iso.Front, "uid 199999") {
		t.Errorf("/environment's isolation.front = %q, want it to name uid 199999", iso.Front)
	}

	c, sid := h.dial("")
	m := promptInputs(t, c, "io", `tr a-z A-Z < "$GLOVEBOX_INPUT/in.txt" > "$GLOVEBOX_OUTPUT/out.txt"; echo done`,
		map[string]protocol.FileRef{"in.txt": protocol.InlineRef("in.txt", "text/plain", []byte("hello"))})
	if m["type"] != "complete" {
		t.Fatalf("a prompt with an input: %v", m)
	}
	out, _ := m["outputs"].(map[string]any)["out.txt"].(map[string]any)
	if data, _ := base64.StdEncoding.DecodeString(fmt.Sprint(out["data"])); string(data) != "HELLO" {
		t.Errorf("the prompt's output out.txt = %v, want HELLO inline", out)
	}
	// An output its agent made unreadable is lost, with an error that
	// says which; the session goes on.
	m = promptResult(t, c, "hide", `echo s > "$GLOVEBOX_OUTPUT/hidden.txt"; chmod 600 "$GLOVEBOX_OUTPUT/hidden.txt"; echo ok`)
	if msg := fmt.Sprint(m["error"]); m["type"] != "error" || !strings.Contains(msg, "hidden.txt") || !strings.Contains(msg, "permission denied") {
		t.Errorf("a prompt whose output is unreadable = %v, want an error naming it", m)
	}
	work := filepath.Join(h.root, "work", sid)
	if m := promptResult(t, c, "w", `echo x > "$GLOVEBOX_WORK/keep"; mkdir -p "$GLOVEBOX_WORK/d"; chmod 700 "$GLOVEBOX_WORK/d"; echo y > "$GLOVEBOX_WORK/d/f"; echo ok`); m["type"] != "complete" {
		t.Fatalf("writing the workspace: %v", m)
	}
	if m := promptResult(t, c, "clear", "/clear-workspace"); m["type"] != "complete" {
		t.Fatalf("/clear-workspace: %v", m)
	}
	if entries, err := os.ReadDir(work); err != nil || len(entries) != 0 {
		t.Errorf("the work directory after /clear-workspace: %d entries, %v; want none", len(entries), err)
	}
	m = promptResult(t, c, "big", `head -c 3000000 /dev/zero > "$GLOVEBOX_WORK/big"; sleep 2; echo finished`)
	if msg := fmt.Sprint(m["error"]); m["type"] != "error" || !strings.Contains(msg, "limits.disk") {
		t.Errorf("a prompt writing past limits.disk = %v, want an error naming limits.disk", m)
	}

	other, _ := h.dial("")
	m = promptResult(t, other, "peek", fmt.Sprintf(`cat %s/* %s/* 2>&1; ls %s 2>&1; echo peek-done`,
		work, filepath.Join(h.root, "input", sid), filepath.Join(h.root, "output", sid)))
	if msg, _ := m["message"].(string); !strings.Contains(msg, "peek-done") || strings.Contains(msg, "hello") || strings.Contains(msg, "out.txt") {
		t.Errorf("another session read this one's files: %v", m)
	}
}

// promptInputs runs one prompt with inputs and returns its last frame.
func promptInputs(t *testing.T, c *wsconn.Conn, id, text string, inputs map[string]protocol.FileRef) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "prompt", "id": id, "text": text, "inputs": inputs})
	if err := c.WriteText(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("prompt %s: read: %v", id, err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		if (m["type"] == "complete" || m["type"] == "error") && m["id"] == id {
			return m
		}
	}
}

// listenerPid is the one process holding the socket listening on port.
func listenerPid(t *testing.T, port string) int {
	t.Helper()
	p, _ := strconv.Atoi(port)
	var inodes []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for line := range strings.Lines(string(b)) {
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" {
				continue
			}
			if _, hexPort, ok := strings.Cut(fields[1], ":"); ok {
				if n, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(n) == p {
					inodes = append(inodes, "socket:["+fields[9]+"]")
				}
			}
		}
	}
	if len(inodes) == 0 {
		t.Fatalf("no socket listens on port %s", port)
	}
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if slices.Contains(inodes, target) {
				pids = append(pids, pid)
				break
			}
		}
	}
	if len(pids) != 1 {
		t.Fatalf("processes holding the listener on port %s: %v, want one", port, pids)
	}
	return pids[0]
}

// traversableDir is a directory for a box whose parents every user may
// traverse, as in the images: a root kit separates its privileges there
// (under t.TempDir's 0700 parents it keeps them in one process).
func traversableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "box-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
