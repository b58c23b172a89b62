package protocol_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

func rule(adapter string, w protocol.When) protocol.Rule {
	return protocol.Rule{Use: protocol.Use{Adapter: adapter}, When: w}
}

func lookup(readOnly ...string) func(string) protocol.AdapterInfo {
	return func(k string) protocol.AdapterInfo {
		switch k {
		case "inline", "url", "localServer", "archive":
			ro := k == "url"
			for _, r := range readOnly {
				ro = ro || r == k
			}
			return protocol.AdapterInfo{Registered: true, ReadOnly: ro}
		}
		return protocol.AdapterInfo{}
	}
}

// TestValidateOutputs checks spec §1.7's checks, order and exact messages.
func TestValidateOutputs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules []protocol.Rule
		want  string // "" for valid
	}{
		{"default policy", protocol.DefaultOutputsPolicy().Rules, ""},
		{"always is terminal", []protocol.Rule{rule("inline", protocol.When{Always: true})}, ""},
		{"no rules", nil, "Outputs policy has no rules"},
		{"empty rules", []protocol.Rule{}, "Outputs policy has no rules"},
		{"unregistered", []protocol.Rule{rule("s3", protocol.When{Always: true})}, "Outputs policy references unregistered adapter: s3"},
		{"unregistered before read-only", []protocol.Rule{
			rule("url", protocol.When{Always: true}),
			rule("s3", protocol.When{Default: true}),
		}, "Outputs policy references unregistered adapter: s3"},
		{"read-only", []protocol.Rule{rule("url", protocol.When{Always: true})}, "Outputs policy may not target adapter \"url\" \u2014 it is read-only"},
		{"read-only custom adapter", []protocol.Rule{rule("archive", protocol.When{Default: true})}, "Outputs policy may not target adapter \"archive\" \u2014 it is read-only"},
		{"read-only before terminal", []protocol.Rule{rule("url", protocol.When{SizeBelow: "1KB"})}, "Outputs policy may not target adapter \"url\" \u2014 it is read-only"},
		{"no terminal rule", []protocol.Rule{
			rule("inline", protocol.When{SizeBelow: "1MB"}),
			rule("localServer", protocol.When{SizeAbove: "1MB"}),
		}, "Outputs policy must include a terminal rule (always: true or default: true)"},
		// v1 let these through and dropped the bound.
		{"bad size after v1's checks", []protocol.Rule{
			rule("inline", protocol.When{SizeBelow: "1MiB"}),
			rule("localServer", protocol.When{Default: true}),
		}, `Outputs policy: rule 1 (inline): sizeBelow: size "1MiB" has unit "MiB"`},
		{"bad ttl", []protocol.Rule{
			{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "soon"}}, When: protocol.When{Default: true}},
		}, `Outputs policy: rule 1 (localServer): options.ttl: duration "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := protocol.ValidateOutputs(protocol.Policy{Rules: tt.rules}, lookup("archive"))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateOutputs() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("ValidateOutputs() = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestValidateOutputsExactMessages(t *testing.T) {
	t.Parallel()
	// The v1 messages are whole, not prefixes of something longer.
	for _, tt := range []struct {
		rules []protocol.Rule
		want  string
	}{
		{nil, "Outputs policy has no rules"},
		{[]protocol.Rule{rule("gcs", protocol.When{Always: true})}, "Outputs policy references unregistered adapter: gcs"},
		{[]protocol.Rule{rule("url", protocol.When{Always: true})}, "Outputs policy may not target adapter \"url\" — it is read-only"},
		{[]protocol.Rule{rule("inline", protocol.When{})}, "Outputs policy must include a terminal rule (always: true or default: true)"},
	} {
		err := protocol.ValidateOutputs(protocol.Policy{Rules: tt.rules}, lookup())
		if err == nil || err.Error() != tt.want {
			t.Errorf("ValidateOutputs(%v) = %v, want %s", tt.rules, err, tt.want)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules []protocol.Rule
		want  string
	}{
		{"valid", protocol.DefaultOutputsPolicy().Rules, ""},
		{"no rules", nil, "policy has no rules"},
		{"missing adapter", []protocol.Rule{rule("", protocol.When{Always: true})}, "rule 1: missing use.adapter"},
		{"bad above", []protocol.Rule{rule("inline", protocol.When{Default: true}), rule("url", protocol.When{SizeAbove: "1Gi"})}, `rule 2 (url): sizeAbove: size "1Gi" has unit "Gi"`},
		{"bad below", []protocol.Rule{rule("inline", protocol.When{SizeBelow: "-1"})}, `rule 1 (inline): sizeBelow: size "-1"`},
		{"ttl not a string", []protocol.Rule{{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": 3600.0}}}}, `rule 1 (localServer): options.ttl must be a duration string such as "1h"`},
		{"ttl zero", []protocol.Rule{{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "0s"}}}}, `rule 1 (localServer): options.ttl: duration "0s" is out of range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := protocol.Policy{Rules: tt.rules}.Check()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want %s", err, tt.want)
			}
		})
	}
}

// TestPolicyJSON checks the encoded rule shapes of spec §1.4 and v1's
// {"__rules": [...]} form.
func TestPolicyJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule protocol.Rule
		want string
	}{
		{rule("inline", protocol.When{Default: true}), `{"use":{"adapter":"inline"},"when":{"default":true}}`},
		{rule("inline", protocol.When{SizeBelow: "1MB"}), `{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MB"}}`},
		{protocol.Rule{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "1h"}}, When: protocol.When{Default: true}},
			`{"use":{"adapter":"localServer","options":{"ttl":"1h"}},"when":{"default":true}}`},
		{protocol.Rule{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": "24h"}}, When: protocol.When{SizeAbove: "1MB"}},
			`{"use":{"adapter":"localServer","options":{"ttl":"24h"}},"when":{"sizeAbove":"1MB"}}`},
		{protocol.Rule{Use: protocol.Use{Adapter: "s3", Options: map[string]any{"bucket": "b"}}, When: protocol.When{Always: true}},
			`{"use":{"adapter":"s3","options":{"bucket":"b"}},"when":{"always":true}}`},
		{rule("url", protocol.When{Always: true}), `{"use":{"adapter":"url"},"when":{"always":true}}`},
		{rule("url", protocol.When{SizeAbove: "1KB", SizeBelow: "10MB"}), `{"use":{"adapter":"url"},"when":{"sizeAbove":"1KB","sizeBelow":"10MB"}}`},
		{rule("inline", protocol.When{}), `{"use":{"adapter":"inline"},"when":{}}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.rule)
		if err != nil || string(got) != tt.want {
			t.Errorf("json.Marshal(%+v) = %s, %v, want %s", tt.rule, got, err, tt.want)
		}
		var back protocol.Rule
		if err := json.Unmarshal([]byte(tt.want), &back); err != nil {
			t.Fatalf("json.Unmarshal(%s) error = %v", tt.want, err)
		}
		if diff := cmp.Diff(tt.rule, back); diff != "" {
			t.Errorf("json.Unmarshal(%s) mismatch (-want +got):\n%s", tt.want, diff)
		}
	}

	outputs := `{"rules":[{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MB"}},{"use":{"adapter":"localServer","options":{"ttl":"1h"}},"when":{"default":true}}]}`
	got, err := json.Marshal(protocol.DefaultOutputsPolicy())
	if err != nil || string(got) != outputs {
		t.Errorf("json.Marshal(DefaultOutputsPolicy()) = %s, %v, want %s", got, err, outputs)
	}
	inputs := `{"rules":[{"use":{"adapter":"url"},"when":{"always":true}},{"use":{"adapter":"inline"},"when":{"default":true}}]}`
	got, err = json.Marshal(protocol.DefaultInputsPolicy())
	if err != nil || string(got) != inputs {
		t.Errorf("json.Marshal(DefaultInputsPolicy()) = %s, %v, want %s", got, err, inputs)
	}
}

func TestPolicyUnmarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want protocol.Policy
	}{
		{"rules", `{"rules":[{"use":{"adapter":"inline"},"when":{"default":true}}]}`,
			protocol.Policy{Rules: []protocol.Rule{rule("inline", protocol.When{Default: true})}}},
		{"v1 __rules", `{"__rules":[{"use":{"adapter":"inline"},"when":{"default":true}}]}`,
			protocol.Policy{Rules: []protocol.Rule{rule("inline", protocol.When{Default: true})}}},
		{"rules win over __rules", `{"__rules":[{"use":{"adapter":"url"},"when":{}}],"rules":[{"use":{"adapter":"inline"},"when":{}}]}`,
			protocol.Policy{Rules: []protocol.Rule{rule("inline", protocol.When{})}}},
		{"options kept", `{"rules":[{"use":{"adapter":"s3","options":{"bucket":"b","n":2}},"when":{"always":true}}]}`,
			protocol.Policy{Rules: []protocol.Rule{{Use: protocol.Use{Adapter: "s3", Options: map[string]any{"bucket": "b", "n": 2.0}}, When: protocol.When{Always: true}}}}},
		{"empty", `{}`, protocol.Policy{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got protocol.Policy
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("json.Unmarshal(%s) error = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("json.Unmarshal(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
	for _, in := range []string{`[]`, `{"rules":{}}`, `{"rules":[{"when":{"always":"yes"}}]}`, `{"rules":[{"use":{"adapter":1}}]}`, `{"__rules":3}`} {
		var got protocol.Policy
		if err := json.Unmarshal([]byte(in), &got); err == nil {
			t.Errorf("json.Unmarshal(%s) = %+v, nil, want an error", in, got)
		}
	}
}

// TestOutputsOverrideApply checks spec §5.11: the override's rules go in
// front, s3 first, then inline_below, then server_ttl as the default.
func TestOutputsOverrideApply(t *testing.T) {
	t.Parallel()
	base := protocol.DefaultOutputsPolicy()
	s3 := func(opts map[string]any) protocol.Rule {
		return protocol.Rule{Use: protocol.Use{Adapter: "s3", Options: opts}, When: protocol.When{Always: true}}
	}
	inline := func(below string) protocol.Rule { return rule("inline", protocol.When{SizeBelow: below}) }
	server := func(ttl string) protocol.Rule {
		return protocol.Rule{Use: protocol.Use{Adapter: "localServer", Options: map[string]any{"ttl": ttl}}, When: protocol.When{Default: true}}
	}
	tests := []struct {
		name string
		o    *protocol.OutputsOverride
		want []protocol.Rule
	}{
		{"nil", nil, base.Rules},
		{"empty", &protocol.OutputsOverride{}, base.Rules},
		{"inline_below", &protocol.OutputsOverride{InlineBelow: "256KB"}, append([]protocol.Rule{inline("256KB")}, base.Rules...)},
		{"server_ttl", &protocol.OutputsOverride{ServerTTL: "24h"}, append([]protocol.Rule{server("24h")}, base.Rules...)},
		{"s3 with every option", &protocol.OutputsOverride{S3: &protocol.S3Override{Bucket: "b", Region: "r", Prefix: "p"}},
			append([]protocol.Rule{s3(map[string]any{"bucket": "b", "region": "r", "prefix": "p"})}, base.Rules...)},
		{"s3 with bucket only", &protocol.OutputsOverride{S3: &protocol.S3Override{Bucket: "b"}},
			append([]protocol.Rule{s3(map[string]any{"bucket": "b"})}, base.Rules...)},
		{"all three, in order", &protocol.OutputsOverride{ServerTTL: "10s", InlineBelow: "1KB", S3: &protocol.S3Override{Bucket: "b"}},
			append([]protocol.Rule{s3(map[string]any{"bucket": "b"}), inline("1KB"), server("10s")}, base.Rules...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.o.Apply(base)
			if diff := cmp.Diff(tt.want, got.Rules); diff != "" {
				t.Errorf("Apply() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Apply does not modify the base policy.
	if diff := cmp.Diff(protocol.DefaultOutputsPolicy(), base); diff != "" {
		t.Errorf("Apply() changed its argument (-want +got):\n%s", diff)
	}
}

func TestOutputsOverrideCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    *protocol.OutputsOverride
		want string
	}{
		{"nil", nil, ""},
		{"valid", &protocol.OutputsOverride{InlineBelow: "1MB", ServerTTL: "1h", S3: &protocol.S3Override{Bucket: "b"}}, ""},
		{"bad inline_below", &protocol.OutputsOverride{InlineBelow: "1MiB"}, `outputs_policy.inline_below: size "1MiB" has unit "MiB"`},
		{"bad server_ttl", &protocol.OutputsOverride{ServerTTL: "forever"}, `outputs_policy.server_ttl: duration "forever"`},
		{"s3 without bucket", &protocol.OutputsOverride{S3: &protocol.S3Override{Region: "r"}}, "outputs_policy.s3: missing bucket"},
		{"s3 with a blank bucket", &protocol.OutputsOverride{S3: &protocol.S3Override{Bucket: " "}}, "outputs_policy.s3: missing bucket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Check()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Check() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Check() = %v, want %s", err, tt.want)
			}
		})
	}
}
