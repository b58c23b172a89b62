// Package storage holds the kit's storage adapters: where a prompt's input
// files come from and where its output files go. Pick applies an outputs
// policy (protocol.Policy) to choose an adapter per file by size; inputs
// are read by the adapter their FileRef kind names.
//
// Built in: inline (bytes in the message), url (read-only fetches, bounded
// in time, size and address), and localServer (files on the box, indexed in
// SQLite, served by GET /files/{id}, swept after their TTL). An s3 adapter
// (SigV4 over the standard library) is registered when configured. Go code
// adds adapters to a Registry under any key.
//
// The kit's use, in order:
//
//	local, err := storage.OpenLocal(ctx, dir, dbPath, storage.LocalOptions{PublicURL: url})
//	reg := storage.NewRegistry() // inline and url
//	reg.Register(protocol.AdapterLocalServer, local)
//	err = local.Start(ctx)       // sweep at boot, then every minute
//	err = reg.ValidateOutputs(policy)
//	ref, err := reg.Store(ctx, policy, meta, file)  // an output
//	rc, err := reg.Open(ctx, inputRef, maxBytes)    // an input
//	local.ServeFile(w, r, id)    // GET /files/{id}, after the bearer check
//	local.Close()                // after the HTTP server stopped
package storage

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Meta describes a file being stored.
type Meta struct {
	Name      string // the output's name (a relative slash path)
	Mime      string
	Size      int64 // exact byte length of the content
	PromptID  string
	SessionID string
	// Owner names the credential of the session that stored the file (the
	// kit's identity: "key", "sub:<subject>" or "token:<hash>"); the local
	// store keeps it so that only the same owner, or a credential that may
	// read the file, reads it back through a server ref.
	Owner string
	// Options are the picked rule's use.options (e.g. "ttl" for
	// localServer, "bucket" for s3).
	Options map[string]any
}

// Adapter stores and reads files of one kind.
type Adapter interface {
	// Put stores exactly meta.Size bytes read from r and returns the ref
	// the client will receive. Implementations stream: they never hold a
	// whole file in memory unless the ref itself carries the bytes.
	Put(ctx context.Context, meta Meta, r io.Reader) (protocol.FileRef, error)
	// Open reads a ref of the kind this adapter handles. The caller
	// closes the reader. max bounds how many bytes the caller will accept;
	// an adapter that knows the size up front fails early with ErrTooLarge.
	Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error)
}

// ReadOnly is implemented by adapters that cannot store outputs (url).
type ReadOnly interface {
	ReadOnly() bool
}

// Sweeper is implemented by adapters that expire files.
type Sweeper interface {
	// Sweep removes expired and orphaned files once.
	Sweep(ctx context.Context, now time.Time) (removed int, err error)
}

// Errors shared by adapters.
var (
	ErrNotFound = errors.New("storage: file not found")
	ErrExpired  = errors.New("storage: file expired")
	ErrReadOnly = errors.New("storage: adapter is read-only")
	ErrTooLarge = errors.New("storage: file too large")
)
