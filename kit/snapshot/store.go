// Package snapshot takes, checks, restores and copies a session's
// directories. A snapshot is content-addressed: every regular file's bytes
// are a blob named by their sha256, stored once however many snapshots
// hold them, and a manifest (protocol.SnapshotManifest) lists every entry.
// The snapshot's id is the sha256 of the manifest's bytes. Blobs are
// written first and the manifest last, atomically, so a snapshot cut
// short (a kill -9) leaves no snapshot, only blobs a later one reuses or
// GC removes.
//
// The session's files are reached through an FS: in the kit, the
// session's helper (kit/sandbox), which opens them as the session, beneath
// its roots, never following a symlink; DirFS does the same for plain
// directories (tests, tools). Take reads through it; Restore verifies a
// whole snapshot (manifest, every blob's size and hash, paths, quota)
// before it writes anything; Copy copies one session's directories into
// another's (fork), cloning files (FICLONE) where the file system can.
package snapshot

import (
	"context"
	"errors"
	"io"
)

// Store keeps blobs and manifests. Local and S3 implement it.
type Store interface {
	// HasBlob reports whether the blob sum is stored.
	HasBlob(ctx context.Context, sum string) (bool, error)
	// PutBlob stores size bytes read from r as blob sum; it fails, and
	// stores nothing, when the bytes do not hash to sum.
	PutBlob(ctx context.Context, sum string, size int64, r io.Reader) error
	// OpenBlob reads blob sum; a missing blob is ErrNotFound.
	OpenBlob(ctx context.Context, sum string) (io.ReadCloser, error)
	// PutManifest stores a manifest under its id, all at once.
	PutManifest(ctx context.Context, id string, b []byte) error
	// Manifest reads a manifest's bytes (at most max); ErrNotFound when
	// there is none.
	Manifest(ctx context.Context, id string, max int64) ([]byte, error)
	// Manifests lists the stored manifests' ids.
	Manifests(ctx context.Context) ([]string, error)
	// DeleteManifest removes a manifest (its blobs stay until GC).
	DeleteManifest(ctx context.Context, id string) error
}

// Errors.
var (
	ErrNotFound = errors.New("snapshot: not found")
	ErrCorrupt  = errors.New("snapshot: corrupt")
	ErrTooLarge = errors.New("snapshot: over the size limit")
	ErrImage    = errors.New("snapshot: taken on another image")
)
