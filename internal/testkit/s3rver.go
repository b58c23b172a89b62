package testkit

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// S3rver runs s3rver (npm: s3rver), an S3-compatible server, on a
// loopback port with one bucket, and returns its endpoint. install is
// the directory where `npm ci` installed it (kit/storage/testdata/s3rver,
// as .ci/run does), relative to the test's package; a global install
// works too. Without either the test is skipped. s3rver checks the access
// key ("S3RVER") but not v4 signatures. It ends with the test.
func S3rver(t testing.TB, install, bucket string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(install, "node_modules", ".bin", "s3rver"))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if bin, err = exec.LookPath("s3rver"); err != nil {
			t.Skip("s3rver is not installed: run npm ci in kit/storage/testdata/s3rver")
		}
	}
	cmd := exec.Command(bin, "-d", t.TempDir(), "-a", "127.0.0.1", "-p", "0", "--configure-bucket", bucket)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-drained
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if a, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "S3rver listening on "); ok && !sent {
				addr <- a
				sent = true
			}
		}
		if !sent {
			close(addr)
		}
	}()
	a, ok := Next(t, addr, "s3rver to listen")
	if !ok {
		t.Fatal("s3rver exited before listening")
	}
	return "http://" + a
}
