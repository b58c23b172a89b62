package snapshot

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

// killEnv makes the test binary a snapshot writer that stops halfway
// through a blob, for TestKillDuringSnapshot to kill -9.
const killEnv = "GLOVEBOX_SNAPSHOT_KILL_CHILD"

// killChild snapshots the roots named in killEnv ("store;work") and
// stops, forever, after the first MiB of its third blob, saying "mid" on
// stdout.
func killChild() {
	storeDir, work, _ := strings.Cut(os.Getenv(killEnv), ";")
	st, err := OpenLocal(storeDir)
	if err != nil {
		panic(err)
	}
	_, _, _, err = Take(context.Background(), DirFS{work}, Roots{true}, &stallStore{Local: st}, Source{}, DefaultLimits, time.Now())
	panic(err)
}

type stallStore struct {
	*Local
	n int
}

func (s *stallStore) PutBlob(ctx context.Context, sum string, size int64, r io.Reader) error {
	if s.n++; s.n == 3 {
		r = io.MultiReader(io.LimitReader(r, 1<<20), stall{})
	}
	return s.Local.PutBlob(ctx, sum, size, r)
}

type stall struct{}

func (stall) Read([]byte) (int, error) {
	os.Stdout.WriteString("mid\n")
	select {}
}

// TestKillDuringSnapshot kills -9 a process taking a snapshot in the
// middle of a blob: the store then lists no snapshot, holds nothing
// half-written once reopened, and a new snapshot of the same files works
// and restores.
func TestKillDuringSnapshot(t *testing.T) {
	ctx := testkit.Context(t, "a snapshot after a kill")
	storeDir := t.TempDir()
	src := newRoots(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		write(t, filepath.Join(src[0], n), strings.Repeat(n, 3<<20), 0o644)
	}
	cmd := exec.Command(testkit.Executable(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), killEnv+"="+storeDir+";"+src[0])
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	if got := testkit.Recv(t, line, "the writer to be midway"); got != "mid\n" {
		cmd.Process.Kill()
		testkit.Exit(t, cmd, "the writer")
		t.Fatalf("writer said %q, want mid", got)
	}
	cmd.Process.Signal(os.Kill)
	testkit.Exit(t, cmd, "the killed writer")

	tmp, _ := os.ReadDir(filepath.Join(storeDir, "tmp"))
	if len(tmp) < 3 {
		t.Fatalf("%d files in tmp, want the two blobs written and the half-written one: the kill came too late to test anything", len(tmp))
	}
	st, err := OpenLocal(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := st.Manifests(ctx); len(ids) != 0 {
		t.Errorf("after a kill the store lists %v, want no snapshot", ids)
	}
	if tmp, _ := os.ReadDir(filepath.Join(storeDir, "tmp")); len(tmp) != 0 {
		t.Errorf("reopening left %d temporary files", len(tmp))
	}
	id, _, stats, err := Take(ctx, src, all, st, Source{}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatalf("Take after the kill: %v", err)
	}
	if stats.NewBlobs != 4 {
		t.Errorf("Take after the kill stored %d blobs, want 4 (the killed one's, never synced, were in tmp/)", stats.NewBlobs)
	}
	m, err := Load(ctx, st, id, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	dst := newRoots(t)
	if _, err := Restore(ctx, st, m, dst, all); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}
