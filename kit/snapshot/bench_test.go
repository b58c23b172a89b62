package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// workspace sizes for the benchmarks: BENCHMARKS.md records them.
// GLOVEBOX_BENCH_1GB=1 adds the 1 GB workspace (run it once, by hand).
type benchSize struct {
	name        string
	files, size int
}

func benchSizes() []benchSize {
	s := []benchSize{
		{"1MB", 1, 1 << 20},
		{"100MB", 100, 1 << 20},
		{"10000x1KB", 10000, 1 << 10},
	}
	if os.Getenv("GLOVEBOX_BENCH_1GB") == "1" {
		s = append(s, benchSize{"1GB", 256, 4 << 20})
	}
	return s
}

// fill makes files distinct files of size bytes, 100 to a directory.
func fill(b *testing.B, dir string, s benchSize) {
	buf := make([]byte, s.size)
	for i := range s.files {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d", i))
		if i%100 == 0 {
			os.MkdirAll(filepath.Dir(p), 0o755)
		}
		for j := 0; j < len(buf); j += 4096 {
			buf[j] = byte(i)
			buf[j+1] = byte(i >> 8)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRoots(b *testing.B) DirFS {
	d := b.TempDir()
	fsys := DirFS{filepath.Join(d, "work"), filepath.Join(d, "input"), filepath.Join(d, "output")}
	for _, p := range fsys {
		os.Mkdir(p, 0o755)
	}
	return fsys
}

// BenchmarkTake: a first snapshot (every blob new), and a second of the
// same files (every blob there: the incremental cost is reading and
// hashing).
func BenchmarkTake(b *testing.B) {
	for _, s := range benchSizes() {
		src := benchRoots(b)
		fill(b, src[0], s)
		b.Run(s.name+"/first", func(b *testing.B) {
			b.SetBytes(int64(s.files * s.size))
			for b.Loop() {
				b.StopTimer()
				st, _ := OpenLocal(b.TempDir())
				b.StartTimer()
				if _, _, _, err := Take(context.Background(), src, all, st, Source{}, DefaultLimits, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.name+"/unchanged-cached", func(b *testing.B) {
			st, _ := OpenLocal(b.TempDir())
			cache := NewHashCache()
			TakeCached(context.Background(), src, all, st, Source{}, DefaultLimits, time.Now(), cache)
			b.SetBytes(int64(s.files * s.size))
			for b.Loop() {
				if _, _, stats, err := TakeCached(context.Background(), src, all, st, Source{}, DefaultLimits, time.Now(), cache); err != nil || stats.NewBlobs != 0 {
					b.Fatal(err, stats)
				}
			}
		})
		b.Run(s.name+"/unchanged", func(b *testing.B) {
			st, _ := OpenLocal(b.TempDir())
			Take(context.Background(), src, all, st, Source{}, DefaultLimits, time.Now())
			b.SetBytes(int64(s.files * s.size))
			for b.Loop() {
				if _, _, stats, err := Take(context.Background(), src, all, st, Source{}, DefaultLimits, time.Now()); err != nil || stats.NewBlobs != 0 {
					b.Fatal(err, stats)
				}
			}
		})
	}
}

// BenchmarkRestore: verify every blob, then write the files.
func BenchmarkRestore(b *testing.B) {
	for _, s := range benchSizes() {
		src := benchRoots(b)
		fill(b, src[0], s)
		st, _ := OpenLocal(b.TempDir())
		id, _, _, err := Take(context.Background(), src, all, st, Source{}, DefaultLimits, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.files * s.size))
			for b.Loop() {
				b.StopTimer()
				dst := benchRoots(b)
				b.StartTimer()
				m, err := Load(context.Background(), st, id, DefaultLimits)
				if err == nil {
					_, err = Restore(context.Background(), st, m, dst, all)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(filepath.Dir(dst[0]))
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCopy: a fork's copy (FICLONE where the file system has it,
// else copy_file_range).
func BenchmarkCopy(b *testing.B) {
	for _, s := range benchSizes() {
		src := benchRoots(b)
		fill(b, src[0], s)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(s.files * s.size))
			var method string
			for b.Loop() {
				b.StopTimer()
				dst := benchRoots(b)
				b.StartTimer()
				m, err := Copy(context.Background(), src, dst, all, DefaultLimits)
				if err != nil {
					b.Fatal(err)
				}
				method = m
				b.StopTimer()
				os.RemoveAll(filepath.Dir(dst[0]))
				b.StartTimer()
			}
			b.ReportMetric(0, method)
		})
	}
}
