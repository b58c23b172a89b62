package kit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// s3Place is a bucket and key prefix the box declares for its outputs.
type s3Place struct{ bucket, prefix string }

// declaredS3 lists the S3 places the box's own configuration names: the
// bucket and prefix of every s3 rule of storage_policy.outputs (the
// adapter's defaults filling what a rule leaves out) and the adapter's
// defaults (GLOVEBOX_S3_BUCKET, GLOVEBOX_S3_PREFIX). outputs is the
// manifest's storage_policy.outputs.
func (st *stores) declaredS3(outputs protocol.Policy) []s3Place {
	a, ok := st.registry.Adapter(protocol.AdapterS3)
	if !ok {
		return nil
	}
	var defBucket, defPrefix string
	if s3, ok := a.(*storage.S3); ok {
		defBucket, defPrefix, _ = s3.Defaults()
	}
	var places []s3Place
	if defBucket != "" {
		places = append(places, s3Place{defBucket, cleanPrefix(defPrefix)})
	}
	for _, r := range outputs.Rules {
		if r.Use.Adapter != protocol.AdapterS3 {
			continue
		}
		b, p := r.Use.Option("bucket"), defPrefix
		if b == "" {
			b = defBucket
		}
		if v, ok := r.Use.Options["prefix"].(string); ok && v != "" {
			p = v
		}
		if b != "" {
			places = append(places, s3Place{b, cleanPrefix(p)})
		}
	}
	return places
}

func cleanPrefix(p string) string { return strings.Trim(p, "/") }

// confine checks a prompt's outputs_policy against what the box declares:
// its s3 bucket must be one the box's configuration names for outputs, and
// its prefix must lie under that place's prefix (an empty one takes the
// place's). The box's credentials sign whatever the policy picks, so a
// client must not pick a bucket or a key the box was never given. It
// returns the override to apply, its prefix made explicit. outputs is
// the manifest's storage_policy.outputs.
func (st *stores) confine(o *protocol.OutputsOverride, outputs protocol.Policy) (*protocol.OutputsOverride, error) {
	if o == nil || o.S3 == nil {
		return o, nil
	}
	want := *o.S3
	if !storage.ValidPrefix(want.Prefix) {
		return nil, fmt.Errorf("outputs_policy.s3.prefix %q is not a key prefix: use segments of letters, digits, '.', '_' and '-', without \".\" or \"..\"", want.Prefix)
	}
	places := st.declaredS3(outputs)
	if len(places) == 0 {
		return nil, errors.New("outputs_policy.s3: this box declares no s3 storage for its outputs, so a prompt cannot send them to s3")
	}
	for _, p := range places {
		if p.bucket != want.Bucket {
			continue
		}
		prefix := cleanPrefix(want.Prefix)
		switch {
		case prefix == "":
			prefix = p.prefix
		case p.prefix == "" || prefix == p.prefix || strings.HasPrefix(prefix, p.prefix+"/"):
		default:
			continue
		}
		out := *o
		s3 := want
		s3.Prefix = prefix // "" only where the place's prefix is empty too
		out.S3 = &s3
		return &out, nil
	}
	return nil, fmt.Errorf("outputs_policy.s3: bucket %q with prefix %q is not storage this box declares (its outputs may go to %s): use one of those, or leave outputs_policy.s3 out", want.Bucket, want.Prefix, describePlaces(places))
}

func describePlaces(places []s3Place) string {
	var parts []string
	for _, p := range places {
		if p.prefix == "" {
			parts = append(parts, "s3://"+p.bucket)
		} else {
			parts = append(parts, "s3://"+p.bucket+"/"+p.prefix+"/...")
		}
	}
	return strings.Join(parts, ", ")
}

// policyKeysIDs reports whether a policy may store through an adapter
// that makes the prompt id part of an object key (anything but inline and
// the box's own store, which index ids without making paths of them).
func policyKeysIDs(p protocol.Policy) bool {
	for _, r := range p.Rules {
		if r.Use.Adapter != protocol.AdapterInline && r.Use.Adapter != protocol.AdapterLocalServer {
			return true
		}
	}
	return false
}
