package snapshot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/storage"
)

// startS3rver runs s3rver (kit/storage's install) with one bucket.
func startS3rver(t *testing.T, bucket string) string {
	return testkit.S3rver(t, filepath.Join("..", "storage", "testdata", "s3rver"), bucket)
}

// TestS3 takes, lists, restores and refuses snapshots in a real
// S3-compatible server.
func TestS3(t *testing.T) {
	ctx := testkit.Context(t, "snapshots in s3rver")
	const bucket = "glovebox-snapshots"
	a, err := storage.NewS3(storage.S3Options{Endpoint: startS3rver(t, bucket), PathStyle: true, Bucket: bucket,
		AccessKeyID: "S3RVER", SecretAccessKey: "S3RVER", Logger: testkit.Logger(t, -4)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseIdleConnections()
	st := NewS3(a, "box1/snaps")

	src := newRoots(t)
	sample(t, src)
	id, m, first, err := Take(ctx, src, all, st, Source{Session: "s1"}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	write(t, filepath.Join(src[0], "README"), "changed", 0o644)
	id2, _, second, err := Take(ctx, src, all, st, Source{Session: "s1"}, DefaultLimits, time.Now())
	if err != nil {
		t.Fatalf("second Take: %v", err)
	}
	if first.NewBlobs != 7 || second.NewBlobs != 1 {
		t.Errorf("new blobs %d then %d, want 7 then 1", first.NewBlobs, second.NewBlobs)
	}
	ids, err := st.Manifests(ctx)
	if err != nil || len(ids) != 2 {
		t.Errorf("Manifests = %v, %v; want %s and %s", ids, err, id, id2)
	}

	got, err := Load(ctx, st, id, DefaultLimits)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("Load (-taken +loaded):\n%s", diff)
	}
	write(t, filepath.Join(src[0], "README"), "hello\n", 0o644)
	os.Chtimes(filepath.Join(src[0], "README"), fileEntry(m, "README").MTime, fileEntry(m, "README").MTime)
	dst := newRoots(t)
	if _, err := Restore(ctx, st, got, dst, all); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if diff := cmp.Diff(withoutFIFO(trees(t, src)), trees(t, dst)); diff != "" {
		t.Errorf("restored from s3 (-snapshotted +restored):\n%s", diff)
	}

	// A blob gone from the bucket: refused, nothing written.
	if err := a.DeleteObject(ctx, "box1/snaps/blobs/"+fileEntry(m, "bin/run.sh").Blob); err != nil {
		t.Fatal(err)
	}
	dst2 := newRoots(t)
	if _, err := Restore(ctx, st, got, dst2, all); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Restore with a blob missing = %v, want ErrCorrupt", err)
	}
	if n := len(tree(t, dst2[0])); n != 0 {
		t.Errorf("a refused restore wrote %d entries", n)
	}
	if err := st.DeleteManifest(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, st, id, DefaultLimits); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load of a deleted snapshot = %v, want ErrNotFound", err)
	}
}
