package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// startS3rver runs s3rver (kit/storage's install) with one bucket.
func startS3rver(t *testing.T, bucket string) string {
	return testkit.S3rver(t, filepath.Join("..", "..", "kit", "storage", "testdata", "s3rver"), bucket)
}

// TestSnapshotS3 runs the kit binary with its snapshot store in an S3
// bucket (s3rver): a snapshot goes there, a restarted kit on a fresh
// root (another box of the same image) lists it and restores it.
func TestSnapshotS3(t *testing.T) {
	const bucket = "glovebox-snaps"
	endpoint := startS3rver(t, bucket)
	key := protocol.NewKey()
	m, _ := protocol.ParseManifest([]byte(`{"name":"s3snap","agent":{"type":"exec","warm":0},"snapshots":{"store":"s3","prefix":"box/snaps"}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	b, _ := json.Marshal(m)
	man := filepath.Join(t.TempDir(), "glovebox.json")
	os.WriteFile(man, b, 0o644)
	start := func() *realKit {
		cmd := kitCmd(t, "GLOVEBOX_KEY="+key, "GLOVEBOX_PORT=0", "GLOVEBOX_INIT=off",
			"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER", "AWS_ENDPOINT_URL_S3="+endpoint,
			"GLOVEBOX_S3_BUCKET="+bucket, "GLOVEBOX_S3_PATH_STYLE=1")
		cmd.Args = append(cmd.Args, "--manifest", man, "--root", t.TempDir())
		return startKitCmd(t, cmd, key)
	}
	k := start()
	c, hello := k.dial(t)
	sendPrompt(t, c, "make", `mkdir d && printf 'in s3' > d/f && ln -s d/f l && echo made`)
	readUntil(t, c, "complete", "make")
	var info protocol.SnapshotInfo
	if code, body := k.call(t, "POST", "/sessions/"+hello.SessionID+"/snapshot", "", &info); code != http.StatusCreated {
		t.Fatalf("snapshot = %d %s", code, body)
	}

	k2 := start() // another box of the image: same bucket, its own root
	var list protocol.SnapshotList
	if code, body := k2.call(t, "GET", "/snapshots", "", &list); code != 200 || len(list.Snapshots) != 1 || list.Snapshots[0].ID != info.ID {
		t.Fatalf("GET /snapshots on the other box = %d %s", code, body)
	}
	var res protocol.RestoreResult
	if code, body := k2.call(t, "POST", "/snapshots/"+info.ID+"/restore", "", &res); code != http.StatusCreated {
		t.Fatalf("restore on the other box = %d %s", code, body)
	}
	rc, _, err := wsconn.Dial(testkit.Context(t, "the WebSocket handshake"), "ws://127.0.0.1:"+k2.port+"/?resume="+res.Session+"&last_seq=0",
		wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	readFrame(t, rc)
	sendPrompt(t, rc, "check", `cat l`)
	if m := readUntil(t, rc, "complete", "check"); !strings.Contains(m["message"].(string), "in s3") {
		t.Errorf("restored from s3: %v", m["message"])
	}
}

// startKitCmd starts cmd, a kit, and waits for its listen line (as
// startRealKit, with the caller's environment).
func startKitCmd(t *testing.T, cmd *exec.Cmd, key string) *realKit {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	k := &realKit{cmd: cmd, key: key, logs: make(chan string, 1024)}
	ports := make(chan string, 1)
	go func() {
		addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if m := addrRE.FindStringSubmatch(line); m != nil && !sent {
				ports <- m[1]
				sent = true
			}
			select {
			case k.logs <- line:
			default:
			}
		}
		if !sent {
			close(ports)
		}
		close(k.logs)
	}()
	port, ok := testkit.Next(t, ports, "the kit's listen line")
	if !ok {
		t.Fatal("the kit exited before it listened")
	}
	k.port = port
	return k
}
