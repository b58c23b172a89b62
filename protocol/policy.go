package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Adapter keys of the built-in storage adapters.
const (
	AdapterInline      = "inline"
	AdapterURL         = "url"
	AdapterLocalServer = "localServer"
	AdapterS3          = "s3"
	AdapterGCS         = "gcs"
)

// Policy is an encoded storage policy: rules that pick a storage adapter
// for a file by its size (kit/storage's Pick applies them). On decoding,
// v1's alternative form {"__rules": [...]} is accepted too.
type Policy struct {
	Rules []Rule `json:"rules"`
}

// Rule says which adapter to use when a condition holds.
type Rule struct {
	Use  Use  `json:"use"`
	When When `json:"when"`
}

// Use names an adapter by its registry key, with adapter options.
type Use struct {
	Adapter string         `json:"adapter"`
	Options map[string]any `json:"options,omitempty"`
}

// When is a rule's condition. Bounds are strict: SizeAbove means size >
// above, SizeBelow means size < below. Always matches at once; Default makes
// the rule the fallback used only when no other rule matched, wherever it
// stands in the list.
type When struct {
	SizeAbove string `json:"sizeAbove,omitempty"`
	SizeBelow string `json:"sizeBelow,omitempty"`
	Always    bool   `json:"always,omitempty"`
	Default   bool   `json:"default,omitempty"`
}

// Option returns a string option of the rule's adapter, or "".
func (u Use) Option(key string) string {
	if s, ok := u.Options[key].(string); ok {
		return s
	}
	return ""
}

// UnmarshalJSON accepts {"rules": [...]} and v1's {"__rules": [...]}.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var w struct {
		Rules  []Rule `json:"rules"`
		URules []Rule `json:"__rules"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.Rules = w.Rules
	if p.Rules == nil {
		p.Rules = w.URules
	}
	return nil
}

// DefaultInputsPolicy is v1's default: url inputs always, inline otherwise.
func DefaultInputsPolicy() Policy {
	return Policy{Rules: []Rule{
		{Use: Use{Adapter: AdapterURL}, When: When{Always: true}},
		{Use: Use{Adapter: AdapterInline}, When: When{Default: true}},
	}}
}

// DefaultOutputsPolicy is v1's default: inline below 1MB, the box's own
// file store with a one-hour TTL otherwise.
func DefaultOutputsPolicy() Policy {
	return Policy{Rules: []Rule{
		{Use: Use{Adapter: AdapterInline}, When: When{SizeBelow: "1MB"}},
		{Use: Use{Adapter: AdapterLocalServer, Options: map[string]any{"ttl": "1h"}}, When: When{Default: true}},
	}}
}

// Check parses every size bound and duration option of the policy. v1
// ignored a bound it could not parse; here it is an error naming the rule.
func (p Policy) Check() error {
	if len(p.Rules) == 0 {
		return errors.New("policy has no rules")
	}
	for i, r := range p.Rules {
		if r.Use.Adapter == "" {
			return fmt.Errorf("rule %d: missing use.adapter", i+1)
		}
		if r.When.SizeAbove != "" {
			if _, err := ParseSize(r.When.SizeAbove); err != nil {
				return fmt.Errorf("rule %d (%s): sizeAbove: %w", i+1, r.Use.Adapter, err)
			}
		}
		if r.When.SizeBelow != "" {
			if _, err := ParseSize(r.When.SizeBelow); err != nil {
				return fmt.Errorf("rule %d (%s): sizeBelow: %w", i+1, r.Use.Adapter, err)
			}
		}
		if ttl, ok := r.Use.Options["ttl"]; ok {
			s, isStr := ttl.(string)
			if !isStr {
				return fmt.Errorf("rule %d (%s): options.ttl must be a duration string such as \"1h\"", i+1, r.Use.Adapter)
			}
			if _, err := ParseDuration(s); err != nil {
				return fmt.Errorf("rule %d (%s): options.ttl: %w", i+1, r.Use.Adapter, err)
			}
		}
	}
	return nil
}

// AdapterInfo describes a registered adapter to ValidateOutputs.
type AdapterInfo struct {
	Registered bool
	ReadOnly   bool
}

// ValidateOutputs checks an outputs policy as v1 does, in v1's order and
// with v1's messages: no rules; an unregistered adapter; a read-only
// adapter; no terminal (always or default) rule. Then it runs Check, so a
// policy v1 accepted with a bound it could not parse is an error too.
func ValidateOutputs(p Policy, lookup func(adapter string) AdapterInfo) error {
	if len(p.Rules) == 0 {
		//lint:ignore ST1005 v1 clients see this exact text (spec §1.7)
		return errors.New("Outputs policy has no rules")
	}
	for _, r := range p.Rules {
		if !lookup(r.Use.Adapter).Registered {
			//lint:ignore ST1005 v1 clients see this exact text (spec §1.7)
			return fmt.Errorf("Outputs policy references unregistered adapter: %s", r.Use.Adapter)
		}
	}
	for _, r := range p.Rules {
		if lookup(r.Use.Adapter).ReadOnly {
			//lint:ignore ST1005 v1 clients see this exact text (spec §1.7)
			return fmt.Errorf("Outputs policy may not target adapter %q \u2014 it is read-only", r.Use.Adapter)
		}
	}
	terminal := false
	for _, r := range p.Rules {
		terminal = terminal || r.When.Always || r.When.Default
	}
	if !terminal {
		//lint:ignore ST1005 v1 clients see this exact text (spec §1.7)
		return errors.New("Outputs policy must include a terminal rule (always: true or default: true)")
	}
	if err := p.Check(); err != nil {
		//lint:ignore ST1005 v1 clients see this exact text (spec §1.7)
		return fmt.Errorf("Outputs policy: %w", err)
	}
	return nil
}

// OutputsOverride is a prompt's outputs_policy: per-prompt changes to the
// outputs policy.
type OutputsOverride struct {
	InlineBelow string      `json:"inline_below,omitempty"`
	S3          *S3Override `json:"s3,omitempty"`
	ServerTTL   string      `json:"server_ttl,omitempty"`
}

// S3Override sends every output of a prompt to S3.
type S3Override struct {
	Bucket string `json:"bucket"`
	Region string `json:"region,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// Check parses the override's size and duration.
func (o *OutputsOverride) Check() error {
	if o == nil {
		return nil
	}
	if o.InlineBelow != "" {
		if _, err := ParseSize(o.InlineBelow); err != nil {
			return fmt.Errorf("outputs_policy.inline_below: %w", err)
		}
	}
	if o.ServerTTL != "" {
		if _, err := ParseDuration(o.ServerTTL); err != nil {
			return fmt.Errorf("outputs_policy.server_ttl: %w", err)
		}
	}
	if o.S3 != nil && strings.TrimSpace(o.S3.Bucket) == "" {
		return errors.New("outputs_policy.s3: missing bucket")
	}
	return nil
}

// Apply returns the policy with the override's rules put in front, as v1
// does: s3 (always), then inline below, then localServer with the TTL as
// the default. A nil or empty override returns p unchanged.
func (o *OutputsOverride) Apply(p Policy) Policy {
	if o == nil || (o.S3 == nil && o.InlineBelow == "" && o.ServerTTL == "") {
		return p
	}
	var rules []Rule
	if o.S3 != nil {
		opts := map[string]any{"bucket": o.S3.Bucket}
		if o.S3.Region != "" {
			opts["region"] = o.S3.Region
		}
		if o.S3.Prefix != "" {
			opts["prefix"] = o.S3.Prefix
		}
		rules = append(rules, Rule{Use: Use{Adapter: AdapterS3, Options: opts}, When: When{Always: true}})
	}
	if o.InlineBelow != "" {
		rules = append(rules, Rule{Use: Use{Adapter: AdapterInline}, When: When{SizeBelow: o.InlineBelow}})
	}
	if o.ServerTTL != "" {
		rules = append(rules, Rule{Use: Use{Adapter: AdapterLocalServer, Options: map[string]any{"ttl": o.ServerTTL}}, When: When{Default: true}})
	}
	return Policy{Rules: append(rules, p.Rules...)}
}
