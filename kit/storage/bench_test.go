package storage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// writeRandomFile writes size pseudo-random bytes to path, streaming.
func writeRandomFile(tb testing.TB, path string, size int64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	chunk := randomBytes(tb, 1<<20)
	for left := size; left > 0; left -= int64(len(chunk)) {
		if _, err := f.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkServeFile measures GET /files/{id} over loopback HTTP for a
// 256 MiB file: the server side (sendfile) and a client reading with a
// 1 MiB buffer.
func BenchmarkServeFile(b *testing.B) {
	l, _ := newLocal(b, LocalOptions{Logger: slog.New(slog.DiscardHandler)})
	const size = 256 << 20
	src := filepath.Join(b.TempDir(), "src")
	writeRandomFile(b, src, size)
	f, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	ref, err := l.Put(b.Context(), Meta{Name: "big.bin", Size: size}, f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := serve(b, l)
	client := srv.Client()
	buf := make([]byte, 1<<20)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Get(srv.URL + "/files/" + ref.ID)
		if err != nil {
			b.Fatal(err)
		}
		// Hide io.Discard's ReaderFrom so the 1 MiB buffer is used.
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, buf)
		resp.Body.Close()
		if err != nil || n != size {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
}

// BenchmarkLoopbackFloor is the transport floor for BenchmarkServeFile:
// the same 256 MiB file sent with sendfile over a bare loopback TCP
// connection to a reader with a 1 MiB buffer, no HTTP.
func BenchmarkLoopbackFloor(b *testing.B) {
	const size = 256 << 20
	src := filepath.Join(b.TempDir(), "src")
	writeRandomFile(b, src, size)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				done <- nil
				return
			}
			f, err := os.Open(src)
			if err != nil {
				done <- err
				return
			}
			c.(*net.TCPConn).ReadFrom(f) // sendfile
			f.Close()
			c.Close()
		}
	}()
	buf := make([]byte, 1<<20)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		// Hide the conn's WriterTo too, so both ends use the 1 MiB buffer.
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{c}, buf)
		c.Close()
		if err != nil || n != size {
			b.Fatalf("read %d bytes, %v", n, err)
		}
	}
	b.StopTimer()
	ln.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLocalPutSmall measures parking a 1 KiB file: temp file, fsync,
// rename, directory fsync, index insert.
func BenchmarkLocalPutSmall(b *testing.B) {
	l, _ := newLocal(b, LocalOptions{Logger: slog.New(slog.DiscardHandler)})
	data := randomBytes(b, 1024)
	r := bytes.NewReader(data)
	for b.Loop() {
		r.Reset(data)
		if _, err := l.Put(b.Context(), Meta{Name: "small.txt", Size: int64(len(data))}, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLocalOpenSmall measures reading a 1 KiB parked file back:
// index lookup, open, read, close.
func BenchmarkLocalOpenSmall(b *testing.B) {
	l, _ := newLocal(b, LocalOptions{Logger: slog.New(slog.DiscardHandler)})
	data := randomBytes(b, 1024)
	ref, err := l.Put(b.Context(), Meta{Name: "small.txt", Size: int64(len(data))}, bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 2048)
	for b.Loop() {
		rc, err := l.Open(b.Context(), ref, 0)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.ReadFull(rc, buf)
		rc.Close()
		if n != len(data) {
			b.Fatalf("read %d bytes", n)
		}
	}
}

// BenchmarkInlineRoundTrip measures a 1 KiB file through the inline
// adapter, Put then Open.
func BenchmarkInlineRoundTrip(b *testing.B) {
	a := NewInline(0)
	data := randomBytes(b, 1024)
	r := bytes.NewReader(data)
	for b.Loop() {
		r.Reset(data)
		ref, err := a.Put(b.Context(), Meta{Name: "small.txt", Size: int64(len(data))}, r)
		if err != nil {
			b.Fatal(err)
		}
		rc, err := a.Open(b.Context(), ref, 0)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, rc)
	}
}

// BenchmarkParkMemory parks a 256 MiB output through Put in a fresh
// subprocess and reports how far its peak RSS rose above the RSS it had
// just before Put (peak-MiB), and the bytes the Go heap allocated during
// Put (alloc-KiB). "file" passes an *os.File; "limited" an io.LimitReader
// over it, as the kit does for outputs; "stream" hides the file behind a plain io.Reader, forcing the buffered
// copy path.
func BenchmarkParkMemory(b *testing.B) {
	src := filepath.Join(b.TempDir(), "src")
	const size = 256 << 20
	writeRandomFile(b, src, size)
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"file", "limited", "stream"} {
		b.Run(mode, func(b *testing.B) {
			var peak, alloc float64
			for b.Loop() {
				cmd := exec.Command(exe, "-test.run=^TestParkHelper$", "-test.v")
				cmd.Env = append(os.Environ(), "GLOVEBOX_PARK_SRC="+src, "GLOVEBOX_PARK_MODE="+mode, "GLOVEBOX_PARK_DIR="+b.TempDir())
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("helper: %v\n%s", err, out)
				}
				sc := bufio.NewScanner(bytes.NewReader(out))
				found := false
				for sc.Scan() {
					if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "park:"); ok {
						fmt.Sscanf(rest, "%f %f", &peak, &alloc)
						found = true
					}
				}
				if !found {
					b.Fatalf("helper printed no figures:\n%s", out)
				}
			}
			b.ReportMetric(peak, "peak-MiB")
			b.ReportMetric(alloc, "alloc-KiB")
		})
	}
}

// TestParkHelper is BenchmarkParkMemory's subprocess; it does nothing in a
// normal test run.
func TestParkHelper(t *testing.T) {
	src := os.Getenv("GLOVEBOX_PARK_SRC")
	if src == "" {
		t.Skip("runs only as BenchmarkParkMemory's subprocess")
	}
	dir := os.Getenv("GLOVEBOX_PARK_DIR")
	l, err := OpenLocal(context.Background(), filepath.Join(dir, "files"), filepath.Join(dir, "files.db"), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = f
	switch os.Getenv("GLOVEBOX_PARK_MODE") {
	case "limited":
		r = io.LimitReader(f, st.Size())
	case "stream":
		r = struct{ io.Reader }{f}
	}
	runtime.GC()
	// Reset the peak RSS to the current RSS (Linux 4.0+).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	base := procStatusKiB(t, "VmRSS")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := l.Put(context.Background(), Meta{Name: "big.bin", Size: st.Size()}, r); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	peak := procStatusKiB(t, "VmHWM")
	fmt.Printf("park: %.2f %.1f\n", float64(peak-base)/1024, float64(after.TotalAlloc-before.TotalAlloc)/1024)
}

// procStatusKiB reads a kB field of /proc/self/status.
func procStatusKiB(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
