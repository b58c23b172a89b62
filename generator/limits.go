package generator

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

func (d *doc) limits(path string, v any, c *Config) {
	m, ok := d.table(path, v, "cpu", "memory", "timeout", "max_message", "max_input", "input_timeout", "disk", "max_connections", "frame_budget")
	if !ok {
		return
	}
	get := func(k string) string {
		x, ok := m[k]
		if !ok {
			return ""
		}
		s, _ := d.str(path+"."+k, x)
		return s
	}
	switch n := m["cpu"].(type) {
	case int64:
		c.Limits.CPU = strconv.FormatInt(n, 10)
	case float64:
		c.Limits.CPU = strconv.FormatFloat(n, 'f', -1, 64)
	default:
		c.Limits.CPU = get("cpu")
	}
	if c.Limits.CPU != "" {
		if f, err := strconv.ParseFloat(c.Limits.CPU, 64); !cpuRE.MatchString(c.Limits.CPU) || err != nil || f <= 0 || f > 256 {
			d.errorf(path+".cpu", "%q is not a CPU count: want a number from 0.1 to 256 such as \"1\", \"2\" or \"0.5\"", c.Limits.CPU)
		}
	}
	if x, ok := m["max_connections"]; ok {
		if n, isInt := x.(int64); isInt && n >= 0 && n <= 1<<20 {
			c.Limits.MaxConnections = int(n)
		} else {
			d.errorf(path+".max_connections", "%v is not a connection count: want a whole number such as 4096 (0 or absent: the default)", x)
		}
	}
	c.Limits.Disk = get("disk")
	if c.Limits.Disk != "" {
		if _, err := protocol.ParseQuantity(c.Limits.Disk); err != nil {
			d.errorf(path+".disk", "%v", err)
		}
	}
	c.Limits.Memory = get("memory")
	if c.Limits.Memory != "" {
		if _, err := MemoryMB(c.Limits.Memory); err != nil {
			d.errorf(path+".memory", "%v", err)
		}
	}
	for _, f := range []struct {
		k   string
		dst *string
		dur bool
	}{{"timeout", &c.Limits.Timeout, true}, {"input_timeout", &c.Limits.InputTimeout, true}, {"max_message", &c.Limits.MaxMessage, false}, {"max_input", &c.Limits.MaxInput, false}, {"frame_budget", &c.Limits.FrameBudget, false}} {
		s := get(f.k)
		if s == "" {
			continue
		}
		*f.dst = s
		var err error
		if f.dur {
			_, err = protocol.ParseDuration(s)
		} else {
			_, err = protocol.ParseSize(s)
		}
		if err != nil {
			d.errorf(path+"."+f.k, "%v", err)
		}
	}
}

// MemoryMB parses a memory limit in MB: v1 size strings ("512MB", "2GB")
// and Kubernetes forms ("512Mi", "2Gi").
func MemoryMB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(t, "i") {
		t = strings.TrimSuffix(t, "i") + "B"
	}
	n, err := protocol.ParseSize(t)
	if err != nil || n < protocol.MB {
		return 0, fmt.Errorf("memory %q: want a size of at least 1MB such as \"512MB\", \"2GB\" or \"2Gi\"", s)
	}
	return n / protocol.MB, nil
}
