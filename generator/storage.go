package generator

import (
	"fmt"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

func (d *doc) storage(path string, v any, c *Config) {
	m, ok := d.table(path, v, "inputs", "outputs")
	if !ok {
		return
	}
	if x, ok := m["inputs"]; ok {
		if p, ok := d.policy(path+".inputs", x, false); ok {
			c.Storage.Inputs = p
		}
	}
	if x, ok := m["outputs"]; ok {
		if p, ok := d.policy(path+".outputs", x, true); ok {
			c.Storage.Outputs = p
		}
	}
}

// policy decodes an array of rule tables ([[storage.outputs]]) with the
// meaning of v1's rule constructors: a rule with no bound and no explicit
// always/default is a default rule for inline and localServer and an
// always rule for the others; localServer's ttl defaults to 1h.
func (d *doc) policy(path string, v any, outputs bool) (protocol.Policy, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		d.errorf(path, "want one or more rules, e.g.\n  [[%s]]\n  use = \"inline\"\n  below = \"1MB\"", path)
		return protocol.Policy{}, false
	}
	good := true
	var rules []protocol.Rule
	for i, e := range arr {
		p := fmt.Sprintf("%s[%d]", path, i)
		r, ok := d.rule(p, e, outputs)
		good = good && ok
		rules = append(rules, r)
	}
	if !good {
		return protocol.Policy{}, false
	}
	pol := protocol.Policy{Rules: rules}
	if outputs {
		terminal := false
		for _, r := range rules {
			terminal = terminal || r.When.Always || r.When.Default
		}
		if !terminal {
			d.errorf(path, "outputs need a terminal rule (one with no size bound, or always = true, or default = true) so every file size has a home")
			return pol, false
		}
	}
	return pol, true
}

func (d *doc) rule(p string, v any, outputs bool) (protocol.Rule, bool) {
	t, ok := d.table(p, v, "use", "above", "below", "always", "default", "ttl", "bucket", "region", "prefix", "options")
	if !ok {
		return protocol.Rule{}, false
	}
	before := len(d.probs)
	var r protocol.Rule
	use, ok := t["use"]
	if !ok {
		d.errorf(p, "missing use: name the adapter (inline, url, localServer, s3, gcs or a custom one)")
		return r, false
	}
	if s, ok := d.str(p+".use", use); ok {
		r.Use.Adapter = s
		if !adapterRE.MatchString(s) {
			d.errorf(p+".use", "%q is not an adapter name: use inline, url, localServer, s3 or a custom adapter's key", s)
		} else {
			d.checkAdapter(p+".use", s)
		}
	}
	if outputs && r.Use.Adapter == protocol.AdapterURL {
		d.errorf(p+".use", "outputs may not use adapter \"url\": it is read-only")
	}
	opts := map[string]any{}
	if x, ok := t["options"]; ok {
		if m, ok := d.strMap(p+".options", x); ok {
			for k, s := range m {
				opts[k] = s
			}
		}
	}
	r.When = d.ruleWhen(p, t, r.Use.Adapter)
	d.adapterOptions(p, t, r.Use.Adapter, opts)
	if len(opts) > 0 {
		r.Use.Options = opts
	}
	if len(d.probs) == before {
		// What the kit will check at boot (e.g. an options.ttl).
		if err := (protocol.Policy{Rules: []protocol.Rule{r}}).Check(); err != nil {
			d.errorf(p, "%s", strings.TrimPrefix(err.Error(), "rule 1 "))
		}
	}
	return r, len(d.probs) == before
}

// ruleWhen is a rule's condition: its size bounds, always or default; a
// rule with none of them is the default for inline and localServer, and
// always for other adapters.
func (d *doc) ruleWhen(p string, t map[string]any, adapter string) protocol.When {
	var w protocol.When
	for _, k := range []string{"above", "below"} {
		x, ok := t[k]
		if !ok {
			continue
		}
		s, ok := d.str(p+"."+k, x)
		if !ok {
			continue
		}
		if _, err := protocol.ParseSize(s); err != nil {
			d.errorf(p+"."+k, "%v", err)
		}
		if k == "above" {
			w.SizeAbove = s
		} else {
			w.SizeBelow = s
		}
	}
	if x, ok := t["always"]; ok {
		w.Always, _ = d.boolean(p+".always", x)
	}
	if x, ok := t["default"]; ok {
		w.Default, _ = d.boolean(p+".default", x)
	}
	if w.Always && w.Default {
		d.errorf(p, "a rule is either always or default, not both")
	}
	if (w.Always || w.Default) && (w.SizeAbove != "" || w.SizeBelow != "") {
		d.errorf(p, "a rule with a size bound cannot also be always or default")
	}
	_, hasAlways := t["always"]
	_, hasDefault := t["default"]
	if w.SizeAbove == "" && w.SizeBelow == "" && !hasAlways && !hasDefault {
		switch adapter {
		case protocol.AdapterInline, protocol.AdapterLocalServer:
			w.Default = true
		default:
			w.Always = true
		}
	}
	return w
}

// adapterOptions adds a rule's adapter settings to opts: localServer's
// ttl (1h unless options set it), s3's and gcs's bucket, region and
// prefix.
func (d *doc) adapterOptions(p string, t map[string]any, adapter string, opts map[string]any) {
	if x, ok := t["ttl"]; ok {
		if adapter != protocol.AdapterLocalServer {
			d.errorf(p+".ttl", "ttl is only for use = \"localServer\"")
		} else if s, ok := d.str(p+".ttl", x); ok {
			if _, err := protocol.ParseDuration(s); err != nil {
				d.errorf(p+".ttl", "%v", err)
			}
			opts["ttl"] = s
		}
	} else if adapter == protocol.AdapterLocalServer {
		if _, set := opts["ttl"]; !set {
			opts["ttl"] = "1h"
		}
	}
	for _, k := range []string{"bucket", "region", "prefix"} {
		x, ok := t[k]
		if !ok {
			continue
		}
		if adapter != protocol.AdapterS3 && adapter != protocol.AdapterGCS {
			d.errorf(p+"."+k, "%s is only for use = \"s3\" or \"gcs\"", k)
			continue
		}
		if s, ok := d.str(p+"."+k, x); ok {
			opts[k] = s
		}
	}
	if (adapter == protocol.AdapterS3 || adapter == protocol.AdapterGCS) && opts["bucket"] == nil {
		d.errorf(p, "use = %q needs a bucket", adapter)
	}
}
