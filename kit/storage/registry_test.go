package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// memAdapter is an adapter a Go author might register: it keeps files in a
// map, keyed by name.
type memAdapter struct{ files map[string][]byte }

func (m *memAdapter) Put(_ context.Context, meta Meta, r io.Reader) (protocol.FileRef, error) {
	b, err := io.ReadAll(io.LimitReader(r, meta.Size))
	if err != nil {
		return protocol.FileRef{}, err
	}
	m.files[meta.Name] = b
	return protocol.FileRef{Kind: protocol.KindS3, Name: meta.Name, Bucket: meta.Options["bucket"].(string), Key: meta.Name}, nil
}

func (m *memAdapter) Open(_ context.Context, ref protocol.FileRef, _ int64) (io.ReadCloser, error) {
	b, ok := m.files[ref.Key]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

var _ Adapter = (*memAdapter)(nil)

func TestRegistryForRef(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	l, _ := newLocal(t, LocalOptions{})
	r.Register(protocol.AdapterLocalServer, l)
	tests := []struct {
		kind    string
		want    Adapter
		wantErr string
	}{
		{kind: "inline", want: mustAdapter(t, r, "inline")},
		{kind: "url", want: mustAdapter(t, r, "url")},
		{kind: "server", want: l},
		{kind: "s3", wantErr: "Received s3 FileRef but no s3 storage adapter is registered"},
		{kind: "gcs", wantErr: "Received gcs FileRef but no gcs storage adapter is registered"},
		{kind: "ftp", wantErr: `unknown kind "ftp"`},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			got, err := r.ForRef(protocol.FileRef{Kind: tt.kind, Name: "f"})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr && !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ForRef(%s) error = %v, want %q", tt.kind, err, tt.wantErr)
				}
				if tt.kind != "ftp" && !errors.Is(err, ErrUnregistered) {
					t.Errorf("ForRef(%s) error does not wrap ErrUnregistered", tt.kind)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ForRef(%s) = %T, %v; want %T", tt.kind, got, err, tt.want)
			}
		})
	}
	if got := (&UnregisteredError{Kind: "s3", Key: "s3"}).Error(); got != "Received s3 FileRef but no s3 storage adapter is registered" {
		t.Errorf("v1 message = %q", got)
	}
}

func mustAdapter(t *testing.T, r *Registry, key string) Adapter {
	t.Helper()
	a, ok := r.Adapter(key)
	if !ok {
		t.Fatalf("no %s adapter registered", key)
	}
	return a
}

func TestRegistryRegister(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	if !r.Registered("inline") || !r.Registered("url") || r.Registered("localServer") || r.Registered("s3") {
		t.Fatal("a new registry should hold exactly inline and url")
	}
	mem := &memAdapter{files: map[string][]byte{}}
	r.Register("s3", mem)
	if a, _ := r.Adapter("s3"); a != mem {
		t.Error("Register did not add s3")
	}
	inline := NewInline(10)
	r.Register("inline", inline)
	if a, _ := r.Adapter("inline"); a != inline {
		t.Error("Register did not override inline")
	}
	r.Register("s3", nil)
	if r.Registered("s3") {
		t.Error("Register(nil) did not remove s3")
	}
}

func TestRegistryValidateOutputs(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	l, _ := newLocal(t, LocalOptions{})
	r.Register(protocol.AdapterLocalServer, l)
	r.Register("web", NewURL(URLOptions{})) // read-only under any key
	tests := []struct {
		name   string
		policy protocol.Policy
		want   string
	}{
		{"default", protocol.DefaultOutputsPolicy(), ""},
		{"empty", protocol.Policy{}, "Outputs policy has no rules"},
		{"unregistered", protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "s3"}, When: protocol.When{Always: true}}}},
			"Outputs policy references unregistered adapter: s3"},
		{"url", protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "url"}, When: protocol.When{Always: true}}}},
			"Outputs policy may not target adapter \"url\" \u2014 it is read-only"},
		{"url under another key", protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "web"}, When: protocol.When{Always: true}}}},
			"Outputs policy may not target adapter \"web\" \u2014 it is read-only"},
		{"no terminal", protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "inline"}, When: protocol.When{SizeBelow: "1MB"}}}},
			"Outputs policy must include a terminal rule (always: true or default: true)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := r.ValidateOutputs(tt.policy)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("ValidateOutputs = %q, want %q", got, tt.want)
			}
		})
	}
}

// The default outputs policy sends files under 1MB inline and the rest,
// from exactly 1MB, to the box's file store with the rule's TTL.
func TestRegistryStore(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	l, clk := newLocal(t, LocalOptions{DefaultTTL: 7 * time.Minute})
	r.Register(protocol.AdapterLocalServer, l)
	mem := &memAdapter{files: map[string][]byte{}}
	r.Register(protocol.AdapterS3, mem)
	override := &protocol.OutputsOverride{ServerTTL: "10s", InlineBelow: "10KB"}
	tests := []struct {
		name     string
		policy   protocol.Policy
		size     int
		wantKind string
		wantTTL  time.Duration
	}{
		{"one byte under 1MB", protocol.DefaultOutputsPolicy(), 1<<20 - 1, "inline", 0},
		{"exactly 1MB", protocol.DefaultOutputsPolicy(), 1 << 20, "server", time.Hour},
		{"empty file", protocol.DefaultOutputsPolicy(), 0, "inline", 0},
		{"override: under inline_below", override.Apply(protocol.DefaultOutputsPolicy()), 10<<10 - 1, "inline", 0},
		{"override: server_ttl", override.Apply(protocol.DefaultOutputsPolicy()), 1 << 20, "server", 10 * time.Second},
		{"override: inline_below prepended to the default", override.Apply(protocol.DefaultOutputsPolicy()), 10 << 10, "inline", 0},
		{"s3 override", (&protocol.OutputsOverride{S3: &protocol.S3Override{Bucket: "bkt"}}).Apply(protocol.DefaultOutputsPolicy()), 5, "s3", 0},
		{"rule without ttl", protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "localServer"}, When: protocol.When{Always: true}}}}, 5, "server", 7 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := randomBytes(t, tt.size)
			ref, err := r.Store(t.Context(), tt.policy, Meta{Name: "out.bin", Size: int64(len(data))}, bytes.NewReader(data))
			if err != nil {
				t.Fatalf("Store: %v", err)
			}
			if ref.Kind != tt.wantKind {
				t.Fatalf("Store of %d bytes gave a %s ref, want %s", tt.size, ref.Kind, tt.wantKind)
			}
			if ref.Kind == "server" {
				var ttlAt int64
				if err := l.db.QueryRow(`SELECT ttl_at FROM files WHERE id = ?`, ref.ID).Scan(&ttlAt); err != nil {
					t.Fatal(err)
				}
				if want := clk.Now().Add(tt.wantTTL).Unix(); ttlAt != want {
					t.Errorf("ttl_at = now+%ds, want now+%ds", ttlAt-clk.Now().Unix(), int64(tt.wantTTL/time.Second))
				}
			}
			rc, err := r.Open(t.Context(), ref, 0)
			if err != nil {
				t.Fatalf("Open(Store(...)): %v", err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, data) {
				t.Errorf("round trip changed the bytes (%d in, %d out)", len(data), len(got))
			}
		})
	}
}

func TestRegistryStoreErrors(t *testing.T) {
	t.Parallel()
	r := NewRegistry() // no localServer
	_, err := r.Store(t.Context(), protocol.DefaultOutputsPolicy(), Meta{Name: "big.bin", Size: 2 << 20}, bytes.NewReader(make([]byte, 2<<20)))
	if !errors.Is(err, ErrNoAdapter) {
		t.Errorf("Store with no matching adapter = %v, want ErrNoAdapter", err)
	}
	urlOnly := protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "url"}, When: protocol.When{Always: true}}}}
	_, err = r.Store(t.Context(), urlOnly, Meta{Name: "a.txt", Size: 1}, strings.NewReader("a"))
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "store a.txt with url") {
		t.Errorf("Store through url = %v, want a wrapped ErrReadOnly", err)
	}
	badBound := protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "inline"}, When: protocol.When{SizeBelow: "1MiB"}}}}
	_, err = r.Store(t.Context(), badBound, Meta{Name: "a.txt", Size: 1}, strings.NewReader("a"))
	if err == nil || !strings.Contains(err.Error(), `"1MiB"`) {
		t.Errorf("Store with an unparsable bound = %v, want an error naming it", err)
	}
}

func TestRegistryOpenValidates(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	_, err := r.Open(t.Context(), protocol.FileRef{Kind: "server", Name: "x"}, 0)
	if err == nil || !strings.Contains(err.Error(), "needs id and url") {
		t.Errorf("Open of an invalid ref = %v, want a validation error", err)
	}
}
