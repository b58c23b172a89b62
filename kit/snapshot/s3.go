package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/storage"
)

// S3 is a Store in an S3 bucket (the kit's s3 adapter, its bucket), under
// prefix: PREFIX/blobs/SUM and PREFIX/manifests/ID.json. A manifest is
// one PUT, so it is there whole or not at all.
type S3 struct {
	a      *storage.S3
	prefix string
}

var _ Store = (*S3)(nil)

// NewS3 is a store in a's default bucket under prefix ("snapshots" when
// empty).
func NewS3(a *storage.S3, prefix string) *S3 {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		prefix = "snapshots"
	}
	return &S3{a: a, prefix: prefix}
}

func (s *S3) blobKey(sum string) string { return s.prefix + "/blobs/" + sum }
func (s *S3) manifestKey(id string) string {
	return s.prefix + "/manifests/" + id + ".json"
}

// HasBlob implements Store.
func (s *S3) HasBlob(ctx context.Context, sum string) (bool, error) {
	if !validSum(sum) {
		return false, fmt.Errorf("blob %q: not a sha256", sum)
	}
	return s.a.HasObject(ctx, s.blobKey(sum))
}

// PutBlob implements Store: the bytes are hashed on their way up; when
// they do not hash to sum the object is removed.
func (s *S3) PutBlob(ctx context.Context, sum string, size int64, r io.Reader) error {
	if !validSum(sum) {
		return fmt.Errorf("blob %q: not a sha256", sum)
	}
	h := sha256.New()
	if err := s.a.PutObject(ctx, s.blobKey(sum), size, io.TeeReader(r, h)); err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		s.a.DeleteObject(context.WithoutCancel(ctx), s.blobKey(sum))
		return fmt.Errorf("store blob %s: the bytes do not hash to the blob's name: %w", sum, errChanged)
	}
	return nil
}

// OpenBlob implements Store.
func (s *S3) OpenBlob(ctx context.Context, sum string) (io.ReadCloser, error) {
	if !validSum(sum) {
		return nil, fmt.Errorf("blob %q: not a sha256: %w", sum, ErrCorrupt)
	}
	r, err := s.a.GetObject(ctx, s.blobKey(sum))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("blob %s: %w", sum, ErrNotFound)
	}
	return r, err
}

// PutManifest implements Store.
func (s *S3) PutManifest(ctx context.Context, id string, b []byte) error {
	if !validSum(id) {
		return fmt.Errorf("snapshot id %q: not a sha256", id)
	}
	return s.a.PutObject(ctx, s.manifestKey(id), int64(len(b)), strings.NewReader(string(b)))
}

// Manifest implements Store.
func (s *S3) Manifest(ctx context.Context, id string, max int64) ([]byte, error) {
	if !validSum(id) {
		return nil, fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	r, err := s.a.GetObject(ctx, s.manifestKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readMax(r, max, id)
}

// Manifests implements Store.
func (s *S3) Manifests(ctx context.Context) ([]string, error) {
	keys, err := s.a.ListKeys(ctx, s.prefix+"/manifests/", 100000)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, k := range keys {
		id, ok := strings.CutSuffix(strings.TrimPrefix(k, s.prefix+"/manifests/"), ".json")
		if ok && validSum(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// DeleteManifest implements Store.
func (s *S3) DeleteManifest(ctx context.Context, id string) error {
	if !validSum(id) {
		return fmt.Errorf("snapshot %q: %w", id, ErrNotFound)
	}
	return s.a.DeleteObject(ctx, s.manifestKey(id))
}
