package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

// pattern is an endless stream of non-zero bytes.
type pattern struct{ i byte }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'a' + p.i%26
		p.i++
	}
	return len(b), nil
}

// BenchmarkBigFile moves 1 GiB into a real kit process through PUT
// /uploads (the client in this process, streaming) and back out through
// GET /files/{id}, both over loopback HTTP.
//
//	go test -run '^$' -bench BigFile -benchtime 1x -count 3 ./cmd/glovebox-kit
func BenchmarkBigFile(b *testing.B) {
	const size = 1 << 30
	key := protocol.NewKey()
	root := b.TempDir()
	m, _ := protocol.ParseManifest([]byte(`{"name":"big","agent":{"type":"exec"}}`))
	m.KeyFingerprint = protocol.Fingerprint(key)
	data, _ := json.Marshal(m)
	manifest := filepath.Join(b.TempDir(), "glovebox.json")
	os.WriteFile(manifest, data, 0o644)
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"GLOVEBOX_KIT_AS_MAIN=1", "PATH=" + os.Getenv("PATH"), "GLOVEBOX_KEY=" + key, "GLOVEBOX_PORT=0"}
	cmd.Args = append(cmd.Args, "--manifest", manifest, "--root", root)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	addrRE := regexp.MustCompile(`addr=\S*:(\d+)`)
	sc := bufio.NewScanner(stderr)
	port := ""
	for port == "" && sc.Scan() {
		if mm := addrRE.FindStringSubmatch(sc.Text()); mm != nil {
			port = mm[1]
		}
	}
	if port == "" {
		b.Fatal("no listen address logged")
	}
	go io.Copy(io.Discard, stderr)
	c, err := client.New(map[string]client.Endpoint{"big": {URL: "ws://127.0.0.1:" + port + "/", Key: key}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	box, _ := c.Box("big")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var up, down time.Duration
	b.SetBytes(2 * size)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		ref, err := box.Upload(ctx, "big.bin", io.LimitReader(&pattern{}, size), size, client.UploadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		up += time.Since(start)
		start = time.Now()
		rc, err := box.File(ctx, ref.ID, client.Consume())
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || n != size {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
		down += time.Since(start)
	}
	b.ReportMetric(float64(size)*float64(b.N)/up.Seconds()/1e6, "upload-MB/s")
	b.ReportMetric(float64(size)*float64(b.N)/down.Seconds()/1e6, "download-MB/s")
}
