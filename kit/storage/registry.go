package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/glovebox-dev/glovebox/protocol"
)

// ErrUnregistered is wrapped by the error Registry returns when a FileRef
// kind or a policy rule names an adapter nobody registered.
var ErrUnregistered = errors.New("storage: adapter not registered")

// UnregisteredError reports a FileRef whose kind has no adapter. Its message
// is v1's, e.g. "Received s3 FileRef but no s3 storage adapter is
// registered".
type UnregisteredError struct {
	Kind string // the ref's kind
	Key  string // the registry key that kind maps to
}

func (e *UnregisteredError) Error() string {
	return fmt.Sprintf("Received %s FileRef but no %s storage adapter is registered", e.Kind, e.Key)
}

// Unwrap returns ErrUnregistered.
func (e *UnregisteredError) Unwrap() error { return ErrUnregistered }

// Registry maps adapter keys (the names a policy's use.adapter refers to)
// to Adapters. It is safe for concurrent use.
//
// A new Registry holds inline and url adapters with default options. The
// kit registers its localServer store (see OpenLocal) under
// protocol.AdapterLocalServer; Go code may register more adapters under
// any key, or override a built-in one, with Register.
type Registry struct {
	mu       sync.RWMutex
	adapters map[string]Adapter
}

// NewRegistry returns a registry holding the inline adapter (with
// DefaultInlineMax) under "inline" and the url adapter (with default
// URLOptions: 60s timeout, private and loopback addresses refused) under
// "url".
func NewRegistry() *Registry {
	return &Registry{adapters: map[string]Adapter{
		protocol.AdapterInline: NewInline(0),
		protocol.AdapterURL:    NewURL(URLOptions{}),
	}}
}

// Register adds a under key, replacing any adapter already there. A nil a
// removes the key.
func (r *Registry) Register(key string, a Adapter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a == nil {
		delete(r.adapters, key)
		return
	}
	r.adapters[key] = a
}

// Adapter returns the adapter registered under key.
func (r *Registry) Adapter(key string) (Adapter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.adapters[key]
	return a, ok
}

// Registered reports whether key has an adapter. It has the shape Pick
// expects.
func (r *Registry) Registered(key string) bool {
	_, ok := r.Adapter(key)
	return ok
}

// Info describes the adapter under key, for protocol.ValidateOutputs. An
// adapter is read-only when it implements ReadOnly and says so, whatever
// key it was registered under (v1 checked the adapter, not the key).
func (r *Registry) Info(key string) protocol.AdapterInfo {
	a, ok := r.Adapter(key)
	if !ok {
		return protocol.AdapterInfo{}
	}
	ro, isRO := a.(ReadOnly)
	return protocol.AdapterInfo{Registered: true, ReadOnly: isRO && ro.ReadOnly()}
}

// ValidateOutputs checks an outputs policy against the registered adapters
// with v1's rules and messages (see protocol.ValidateOutputs).
func (r *Registry) ValidateOutputs(p protocol.Policy) error {
	return protocol.ValidateOutputs(p, r.Info)
}

// Pick returns the adapter and the rule an outputs policy chooses for a
// file of size bytes, with v1's selection semantics (see Pick).
func (r *Registry) Pick(p protocol.Policy, size int64) (Adapter, protocol.Rule, error) {
	rule, err := Pick(p, size, r.Registered)
	if err != nil {
		return nil, protocol.Rule{}, err
	}
	a, ok := r.Adapter(rule.Use.Adapter)
	if !ok { // unregistered between Pick and here
		return nil, protocol.Rule{}, fmt.Errorf("storage adapter %s: %w", rule.Use.Adapter, ErrUnregistered)
	}
	return a, rule, nil
}

// Store picks the adapter for meta.Size under policy p, passes it the
// rule's options as meta.Options, and stores exactly meta.Size bytes from
// body through it. It returns the ref the client will receive.
func (r *Registry) Store(ctx context.Context, p protocol.Policy, meta Meta, body io.Reader) (protocol.FileRef, error) {
	a, rule, err := r.Pick(p, meta.Size)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("store %s: %w", meta.Name, err)
	}
	meta.Options = rule.Use.Options
	ref, err := a.Put(ctx, meta, body)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("store %s with %s: %w", meta.Name, rule.Use.Adapter, err)
	}
	return ref, nil
}

// KeyForKind returns the registry key v1 uses to read a FileRef of the
// given kind: inline -> "inline", url -> "url", server -> "localServer",
// s3 -> "s3", gcs -> "gcs". Unknown kinds return "".
func KeyForKind(kind string) string {
	switch kind {
	case protocol.KindInline:
		return protocol.AdapterInline
	case protocol.KindURL:
		return protocol.AdapterURL
	case protocol.KindServer:
		return protocol.AdapterLocalServer
	case protocol.KindS3:
		return protocol.AdapterS3
	case protocol.KindGCS:
		return protocol.AdapterGCS
	}
	return ""
}

// ForRef returns the adapter that reads ref, chosen by its kind as v1 does
// (the inputs policy plays no part). A kind with no registered adapter
// gives an *UnregisteredError.
func (r *Registry) ForRef(ref protocol.FileRef) (Adapter, error) {
	key := KeyForKind(ref.Kind)
	if key == "" {
		return nil, fmt.Errorf("file %q: unknown kind %q (want inline, url, server, s3 or gcs)", ref.Name, ref.Kind)
	}
	a, ok := r.Adapter(key)
	if !ok {
		return nil, &UnregisteredError{Kind: ref.Kind, Key: key}
	}
	return a, nil
}

// Open validates ref and opens it with the adapter its kind names, reading
// at most max bytes (max <= 0: no bound). The caller closes the reader.
func (r *Registry) Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	a, err := r.ForRef(ref)
	if err != nil {
		return nil, err
	}
	return a.Open(ctx, ref, max)
}
