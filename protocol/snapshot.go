package protocol

import (
	"encoding/hex"
	"time"
)

// Snapshots (issue 29). A snapshot is a session's directories (work,
// input, output) stored in the box's snapshot store: every regular file's
// bytes once, as a blob named by its sha256, and a manifest listing every
// entry. The snapshot's id is the sha256 (hex) of its manifest's bytes, so
// a snapshot cannot be changed without changing its id.
//
//	POST   /sessions/{id}/snapshot   snapshot a live session: SnapshotInfo
//	GET    /snapshots                SnapshotList
//	GET    /snapshots/{id}           the SnapshotManifest
//	DELETE /snapshots/{id}           204
//	POST   /snapshots/{id}/restore   RestoreRequest: RestoreResult (a new session)
//	POST   /sessions/{id}/fork       ForkRequest: ForkResult (new sessions)
//
// A restored or forked session waits, detached, for its client to attach
// with ?resume=ID&last_seq=0 (as a dropped session does) within the
// box's resume grace; it ends if none does.

// SnapshotManifestVersion is the manifest format this package writes.
const SnapshotManifestVersion = 1

// Snapshot entry types.
const (
	SnapshotDir     = "dir"
	SnapshotFile    = "file"
	SnapshotSymlink = "symlink"
)

// Snapshot roots: the session's directories.
const (
	SnapshotRootWork   = "work"
	SnapshotRootInput  = "input"
	SnapshotRootOutput = "output"
)

// SnapshotManifest lists a snapshot's entries and says where it came
// from. Entries are sorted by root (work, input, output) then path, so a
// directory comes before what it holds.
type SnapshotManifest struct {
	V int `json:"v"`
	// Box and BoxVersion are the box's manifest name and version.
	Box        string `json:"box,omitempty"`
	BoxVersion string `json:"box_version,omitempty"`
	// ClosureSHA256 is the image's closure hash (Provenance.ClosureSHA256):
	// a restore on a box whose image differs is refused unless forced.
	ClosureSHA256 string `json:"closure_sha256,omitempty"`
	// ManifestSHA256 is the sha256 of the box manifest the kit loaded.
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	// Session and Owner are the snapshotted session and the identity of
	// the credential that opened it ("key", "sub:NAME", "token:HASH").
	Session string    `json:"session"`
	Owner   string    `json:"owner,omitempty"`
	Created time.Time `json:"created"`
	// Agent is the agent's own id of the session's conversation (an ACP
	// session id), where the agent has one: a session restored or forked
	// from the snapshot has its agent load it (ACP session/load) when the
	// agent can. What the agent keeps of the conversation is in the
	// session's directories (its HOME is the work directory). Additive.
	Agent string `json:"agent,omitempty"`
	// Size is the sum of the files' sizes.
	Size    int64           `json:"size"`
	Entries []SnapshotEntry `json:"entries"`
	// Skipped are entries not stored: special files (devices, fifos,
	// sockets) and files the session itself cannot read.
	Skipped []SnapshotSkip `json:"skipped,omitempty"`
}

// SnapshotEntry is one directory, file or symlink of a snapshot.
type SnapshotEntry struct {
	Root string `json:"root"` // work, input or output
	// Path is a clean slash path relative to the root ("src/main.go").
	Path string `json:"path"`
	Type string `json:"type"` // dir, file or symlink
	// Mode holds the permission bits (0o7777 at most; setuid and setgid
	// are never restored).
	Mode  uint32    `json:"mode"`
	Size  int64     `json:"size,omitempty"`
	MTime time.Time `json:"mtime"`
	// Blob is a file's content: the sha256 (hex) of its bytes.
	Blob string `json:"blob,omitempty"`
	// Target is a symlink's target, as the link holds it.
	Target string `json:"target,omitempty"`
}

// SnapshotSkip is an entry a snapshot left out, and why.
type SnapshotSkip struct {
	Root   string `json:"root"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// SnapshotInfo describes a stored snapshot: what GET /snapshots lists and
// POST /sessions/{id}/snapshot answers.
type SnapshotInfo struct {
	ID            string    `json:"id"`
	Session       string    `json:"session"`
	Owner         string    `json:"owner,omitempty"`
	Created       time.Time `json:"created"`
	ClosureSHA256 string    `json:"closure_sha256,omitempty"`
	Size          int64     `json:"size"`
	Entries       int       `json:"entries"`
	// Skipped counts the entries the snapshot left out.
	Skipped int `json:"skipped,omitempty"`
	// NewBlobs and NewBytes are what taking the snapshot stored that the
	// store did not hold already (POST only).
	NewBlobs int   `json:"new_blobs,omitempty"`
	NewBytes int64 `json:"new_bytes,omitempty"`
}

// SnapshotList answers GET /snapshots, newest first.
type SnapshotList struct {
	Snapshots []SnapshotInfo `json:"snapshots"`
}

// RestoreRequest is POST /snapshots/{id}/restore's body (optional).
type RestoreRequest struct {
	// Force restores a snapshot of another image. Files restore as they
	// were; programs in the workspace built against the old image's store
	// paths may no longer run.
	Force bool `json:"force,omitempty"`
}

// RestoreResult is a restore's answer: the new session, detached until
// its client attaches with ?resume=SESSION&last_seq=0.
type RestoreResult struct {
	Session  string `json:"session"`
	Snapshot string `json:"snapshot"`
	// Warnings say what may not be as it was (another image, modes or
	// times the box could not set).
	Warnings []string `json:"warnings,omitempty"`
}

// ForkRequest is POST /sessions/{id}/fork's body.
type ForkRequest struct {
	// Count is how many new sessions (1 when 0).
	Count int `json:"count,omitempty"`
}

// ForkResult lists the new sessions, each detached until its client
// attaches with ?resume=ID&last_seq=0.
type ForkResult struct {
	Sessions []string `json:"sessions"`
	// Method is how the files were copied: "reflink" (copy-on-write
	// clones) or "copy".
	Method string `json:"method"`
}

// SnapshotsSpec is the manifest's snapshots table.
type SnapshotsSpec struct {
	// Store is where snapshots go: "local" (default: the kit's state
	// directory) or "s3" (the bucket of the kit's s3 adapter,
	// GLOVEBOX_S3_BUCKET, under Prefix).
	Store string `json:"store,omitempty"`
	// Prefix is the key prefix in the bucket (default "snapshots").
	Prefix string `json:"prefix,omitempty"`
	// MaxSize caps one snapshot's files ("10GB" by default).
	MaxSize string `json:"max_size,omitempty"`
	// MaxSnapshots caps how many snapshots the store holds (default 100).
	MaxSnapshots int `json:"max_snapshots,omitempty"`
}

// Snapshot stores.
const (
	SnapshotStoreLocal = "local"
	SnapshotStoreS3    = "s3"
)

func (s *SnapshotsSpec) check(add func(string, ...any)) {
	if s.Store != "" && s.Store != SnapshotStoreLocal && s.Store != SnapshotStoreS3 {
		add("manifest: snapshots.store %q: use \"local\" or \"s3\"", s.Store)
	}
	if s.MaxSize != "" {
		if _, err := ParseSize(s.MaxSize); err != nil {
			add("manifest: snapshots.max_size: %v", err)
		}
	}
	if s.MaxSnapshots < 0 {
		add("manifest: snapshots.max_snapshots %d: must not be negative", s.MaxSnapshots)
	}
}

// ValidSnapshotID reports whether id is a snapshot id: 64 lowercase hex
// digits.
func ValidSnapshotID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	_, err := hex.DecodeString(id)
	return err == nil
}
