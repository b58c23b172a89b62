package storage

import (
	"errors"

	"github.com/glovebox-dev/glovebox/protocol"
)

// ErrNoAdapter is returned by Pick when no rule matched and there is no
// default rule.
//
//lint:ignore ST1005 v1 clients see this exact text (spec §1.6)
var ErrNoAdapter = errors.New("No storage adapter matched policy and no default rule registered")

// Pick chooses the rule of policy p for a file of the given size, with v1's
// semantics: rules whose adapter is not registered are skipped; the first
// default rule is remembered as the fallback; an always rule matches at
// once; otherwise the strict bounds decide, and a rule with no condition
// matches. A bound that does not parse is an error (run p.Check first to
// report it early). A nil registered takes every adapter as registered.
func Pick(p protocol.Policy, size int64, registered func(adapter string) bool) (protocol.Rule, error) {
	var fallback *protocol.Rule
	for i := range p.Rules {
		r := &p.Rules[i]
		if registered != nil && !registered(r.Use.Adapter) {
			continue
		}
		if r.When.Default {
			if fallback == nil {
				fallback = r
			}
			continue
		}
		if r.When.Always {
			return *r, nil
		}
		ok, err := withinBounds(size, r.When)
		if err != nil {
			return protocol.Rule{}, err
		}
		if ok {
			return *r, nil
		}
	}
	if fallback != nil {
		return *fallback, nil
	}
	return protocol.Rule{}, ErrNoAdapter
}

// withinBounds reports whether size lies within w's strict bounds: above
// sizeAbove and below sizeBelow, each compared with the bound's exact value
// as v1 does (a file of 1 byte is below "1.5B"). A missing bound holds.
func withinBounds(size int64, w protocol.When) (bool, error) {
	if w.SizeAbove != "" {
		above, err := protocol.ParseSizeExact(w.SizeAbove)
		if err != nil {
			return false, err
		}
		if float64(size) <= above {
			return false, nil
		}
	}
	if w.SizeBelow != "" {
		below, err := protocol.ParseSizeExact(w.SizeBelow)
		if err != nil {
			return false, err
		}
		if float64(size) >= below {
			return false, nil
		}
	}
	return true, nil
}
