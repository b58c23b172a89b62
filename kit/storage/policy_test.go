package storage_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

func rule(adapter string, w protocol.When) protocol.Rule {
	return protocol.Rule{Use: protocol.Use{Adapter: adapter}, When: w}
}

func registry(keys ...string) func(string) bool {
	return func(k string) bool {
		for _, r := range keys {
			if r == k {
				return true
			}
		}
		return false
	}
}

// TestPick checks spec §1.6's verified semantics.
func TestPick(t *testing.T) {
	builtins := registry("inline", "url", "localServer")
	tests := []struct {
		name       string
		rules      []protocol.Rule
		registered func(string) bool
		size       int64
		want       string // the picked adapter
	}{
		{"default policy, small", protocol.DefaultOutputsPolicy().Rules, builtins, 10, "inline"},
		{"default policy, 1MB-1", protocol.DefaultOutputsPolicy().Rules, builtins, 1<<20 - 1, "inline"},
		{"default policy, exactly 1MB goes on", protocol.DefaultOutputsPolicy().Rules, builtins, 1 << 20, "localServer"},
		{"default policy, big", protocol.DefaultOutputsPolicy().Rules, builtins, 1 << 30, "localServer"},
		{"default policy, empty file", protocol.DefaultOutputsPolicy().Rules, builtins, 0, "inline"},
		{"unregistered adapter skipped", []protocol.Rule{
			rule("s3", protocol.When{Always: true}),
			rule("inline", protocol.When{Default: true}),
		}, builtins, 5, "inline"},
		{"nil registry registers everything", []protocol.Rule{
			rule("s3", protocol.When{Always: true}),
			rule("inline", protocol.When{Default: true}),
		}, nil, 5, "s3"},
		{"default is not positional", []protocol.Rule{
			rule("localServer", protocol.When{Default: true}),
			rule("inline", protocol.When{SizeBelow: "1KB"}),
		}, builtins, 5, "inline"},
		{"default is the fallback wherever it stands", []protocol.Rule{
			rule("localServer", protocol.When{Default: true}),
			rule("inline", protocol.When{SizeBelow: "1KB"}),
		}, builtins, 4096, "localServer"},
		{"first default wins", []protocol.Rule{
			rule("localServer", protocol.When{Default: true}),
			rule("inline", protocol.When{Default: true}),
		}, builtins, 5, "localServer"},
		{"unregistered default skipped", []protocol.Rule{
			rule("s3", protocol.When{Default: true}),
			rule("inline", protocol.When{Default: true}),
		}, builtins, 5, "inline"},
		{"default checked before always", []protocol.Rule{
			rule("localServer", protocol.When{Default: true, Always: true}),
			rule("inline", protocol.When{SizeBelow: "1KB"}),
		}, builtins, 5, "inline"},
		{"always matches at once", []protocol.Rule{
			rule("url", protocol.When{Always: true}),
			rule("inline", protocol.When{}),
		}, builtins, 5, "url"},
		{"always ignores bounds", []protocol.Rule{
			rule("url", protocol.When{Always: true, SizeBelow: "1B"}),
		}, builtins, 5 << 20, "url"},
		{"empty when matches", []protocol.Rule{
			rule("inline", protocol.When{}),
			rule("localServer", protocol.When{Always: true}),
		}, builtins, 1 << 30, "inline"},
		{"first match wins", []protocol.Rule{
			rule("inline", protocol.When{SizeBelow: "1MB"}),
			rule("localServer", protocol.When{SizeBelow: "10MB"}),
		}, builtins, 100, "inline"},
		{"above is strict: equal is not above", []protocol.Rule{
			rule("localServer", protocol.When{SizeAbove: "1KB"}),
			rule("inline", protocol.When{Default: true}),
		}, builtins, 1024, "inline"},
		{"above is strict: one more is above", []protocol.Rule{
			rule("localServer", protocol.When{SizeAbove: "1KB"}),
			rule("inline", protocol.When{Default: true}),
		}, builtins, 1025, "localServer"},
		{"both bounds, inside", []protocol.Rule{
			rule("url", protocol.When{SizeAbove: "1KB", SizeBelow: "10MB"}),
			rule("inline", protocol.When{Default: true}),
		}, registry("url", "inline"), 2048, "url"},
		{"both bounds, at the upper", []protocol.Rule{
			rule("url", protocol.When{SizeAbove: "1KB", SizeBelow: "10MB"}),
			rule("inline", protocol.When{Default: true}),
		}, registry("url", "inline"), 10 << 20, "inline"},
		{"fractional bound compares exactly: 1 < 1.5", []protocol.Rule{
			rule("inline", protocol.When{SizeBelow: "1.5B"}),
			rule("localServer", protocol.When{Default: true}),
		}, builtins, 1, "inline"},
		{"fractional bound compares exactly: 102 < 102.4", []protocol.Rule{
			rule("inline", protocol.When{SizeBelow: "0.1KB"}),
			rule("localServer", protocol.When{Default: true}),
		}, builtins, 102, "inline"},
		{"fractional bound compares exactly: 103 is not below 102.4", []protocol.Rule{
			rule("inline", protocol.When{SizeBelow: "0.1KB"}),
			rule("localServer", protocol.When{Default: true}),
		}, builtins, 103, "localServer"},
		{"fractional above: 102 is not above 102.4", []protocol.Rule{
			rule("localServer", protocol.When{SizeAbove: "0.1KB"}),
			rule("inline", protocol.When{Default: true}),
		}, builtins, 102, "inline"},
		{"default inputs policy", protocol.DefaultInputsPolicy().Rules, builtins, 5, "url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := protocol.Policy{Rules: tt.rules}
			got, err := storage.Pick(p, tt.size, tt.registered)
			if err != nil || got.Use.Adapter != tt.want {
				t.Errorf("Pick(%d) = %s, %v, want %s", tt.size, got.Use.Adapter, err, tt.want)
			}
		})
	}
}

func TestPickReturnsRule(t *testing.T) {
	p := protocol.DefaultOutputsPolicy()
	got, err := storage.Pick(p, 2<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.Rules[1], got); diff != "" {
		t.Errorf("Pick(2MB) mismatch (-want +got):\n%s", diff)
	}
	if ttl := got.Use.Option("ttl"); ttl != "1h" {
		t.Errorf("Pick(2MB).Use.Option(ttl) = %q, want 1h", ttl)
	}
	if o := got.Use.Option("missing"); o != "" {
		t.Errorf("Use.Option(missing) = %q, want empty", o)
	}
}

func TestPickError(t *testing.T) {
	tests := []struct {
		name  string
		rules []protocol.Rule
		want  string
	}{
		{"no rules", nil, "No storage adapter matched policy and no default rule registered"},
		{"nothing matches", []protocol.Rule{rule("inline", protocol.When{SizeBelow: "1KB"})}, "No storage adapter matched policy and no default rule registered"},
		{"only unregistered", []protocol.Rule{rule("s3", protocol.When{Always: true})}, "No storage adapter matched policy and no default rule registered"},
		// v1 dropped an unparsable bound and matched everything.
		{"bad size bound", []protocol.Rule{rule("inline", protocol.When{SizeBelow: "1MiB"})}, `size "1MiB" has unit "MiB"`},
		{"bad above bound", []protocol.Rule{rule("inline", protocol.When{SizeAbove: "1.2.3"})}, `size "1.2.3" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := protocol.Policy{Rules: tt.rules}
			got, err := storage.Pick(p, 4096, registry("inline", "localServer"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Pick(4096) = %s, %v, want an error containing %q", got.Use.Adapter, err, tt.want)
			}
			if strings.HasPrefix(tt.want, "No storage") && !errors.Is(err, storage.ErrNoAdapter) {
				t.Errorf("Pick(4096) error = %v, want %v", err, storage.ErrNoAdapter)
			}
		})
	}
}

// TestOutputsOverridePick checks what the overridden policy picks, with
// the fallback semantics of §1.6: server_ttl's default rule comes first, so
// it is the fallback rather than the base policy's.
func TestOutputsOverridePick(t *testing.T) {
	o := &protocol.OutputsOverride{InlineBelow: "256KB", ServerTTL: "24h"}
	p := o.Apply(protocol.DefaultOutputsPolicy())
	tests := []struct {
		size    int64
		adapter string
		ttl     string
	}{
		{100, "inline", ""},
		{256 << 10, "inline", ""}, // not below 256KB, but below the base's 1MB
		{1 << 20, "localServer", "24h"},
	}
	for _, tt := range tests {
		got, err := storage.Pick(p, tt.size, nil)
		if err != nil || got.Use.Adapter != tt.adapter || got.Use.Option("ttl") != tt.ttl {
			t.Errorf("Pick(%d) = %s ttl %q, %v, want %s ttl %q", tt.size, got.Use.Adapter, got.Use.Option("ttl"), err, tt.adapter, tt.ttl)
		}
	}
}

// FuzzPick checks that a policy which passed Check picks a registered
// adapter's rule or reports ErrNoAdapter, and that Pick never panics.
func FuzzPick(f *testing.F) {
	for _, s := range []string{
		`{"rules":[{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MB"}},{"use":{"adapter":"localServer","options":{"ttl":"1h"}},"when":{"default":true}}]}`,
		`{"__rules":[{"use":{"adapter":"url"},"when":{"always":true}}]}`,
		`{"rules":[{"use":{"adapter":"inline"},"when":{"sizeAbove":"1.5B","sizeBelow":"0.1KB"}}]}`,
		`{"rules":[{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MiB"}}]}`,
		`{"rules":[{"use":{"adapter":"s3","options":{"ttl":3600}},"when":{}}]}`,
		`{}`, `{"rules":[]}`,
	} {
		f.Add([]byte(s), int64(1<<20))
	}
	registered := func(a string) bool { return a != "s3" }
	f.Fuzz(func(t *testing.T, in []byte, size int64) {
		var p protocol.Policy
		if err := json.Unmarshal(in, &p); err != nil {
			return
		}
		checkErr := p.Check()
		if size < 0 {
			size = -size
		}
		r, err := storage.Pick(p, size, registered)
		if checkErr == nil && err != nil && !errors.Is(err, storage.ErrNoAdapter) {
			t.Fatalf("Pick(%d) of a policy that passed Check = %v, want a rule or ErrNoAdapter", size, err)
		}
		if err == nil && !registered(r.Use.Adapter) {
			t.Fatalf("Pick(%d) = unregistered adapter %q", size, r.Use.Adapter)
		}
	})
}
