package generator

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Fly is [deploy.fly]. Empty strings mean "not set".
type Fly struct {
	// App is the Fly app name, global on Fly; empty keeps what fly.toml
	// has (what `fly launch` wrote), else the box name.
	App string
	// Region is the primary region, a Fly region code such as "ams".
	Region string
	// Size is a Fly VM size preset such as "shared-cpu-2x".
	Size string
	// Memory is the VM memory in MB, 0 for the preset's, or limits.memory.
	MemoryMB int64
}

// flySize is one of Fly's VM size presets: its CPU kind and count and its
// default memory. Memory may range from MinPerCPU to MaxPerCPU times the
// CPU count in steps of 256 MB (fly.io/docs/machines/guides-examples/machine-sizing).
type flySize struct {
	Kind      string
	CPUs      int
	MemoryMB  int64
	MinPerCPU int64
	MaxPerCPU int64
}

var flySizes = map[string]flySize{
	"shared-cpu-1x":   {"shared", 1, 256, 256, 2048},
	"shared-cpu-2x":   {"shared", 2, 512, 256, 2048},
	"shared-cpu-4x":   {"shared", 4, 1024, 256, 2048},
	"shared-cpu-8x":   {"shared", 8, 2048, 256, 2048},
	"performance-1x":  {"performance", 1, 2048, 2048, 8192},
	"performance-2x":  {"performance", 2, 4096, 2048, 8192},
	"performance-4x":  {"performance", 4, 8192, 2048, 8192},
	"performance-8x":  {"performance", 8, 16384, 2048, 8192},
	"performance-16x": {"performance", 16, 32768, 2048, 8192},
}

// flyRegions are Fly's public region codes (fly.io/docs/reference/regions).
var flyRegions = []string{
	"ams", "arn", "atl", "bog", "bom", "bos", "cdg", "den", "dfw", "ewr", "eze", "fra",
	"gdl", "gig", "gru", "hkg", "iad", "jnb", "lax", "lhr", "mad", "mia", "nrt", "ord",
	"otp", "phx", "qro", "scl", "sea", "sin", "sjc", "syd", "waw", "yul", "yyz",
}

// flyAppRE is Fly's rule for app names: lowercase letters, digits and
// dashes, starting with a letter or digit.
var flyAppRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func (d *doc) fly(p string, v any, c *Config) {
	t, ok := d.table(p, v, "app", "region", "size", "memory")
	if !ok {
		return
	}
	f := &c.Deploy.Fly
	if x, ok := t["app"]; ok {
		if s, ok := d.str(p+".app", x); ok {
			if !flyAppRE.MatchString(s) {
				d.errorf(p+".app", "%q is not a Fly app name: use 1 to 63 lowercase letters, digits and -, starting with a letter or digit (app names are global on Fly)", s)
			}
			f.App = s
		}
	}
	if x, ok := t["region"]; ok {
		if s, ok := d.str(p+".region", x); ok {
			if !slices.Contains(flyRegions, s) {
				d.errorf(p+".region", "%q is not a Fly region%s; use one of %s (`fly platform regions` lists them)", s, didYouMean(s, flyRegions), strings.Join(flyRegions, ", "))
			}
			f.Region = s
		}
	}
	if x, ok := t["size"]; ok {
		if s, ok := d.str(p+".size", x); ok {
			if _, known := flySizes[s]; !known {
				d.errorf(p+".size", "%q is not a Fly VM size%s; use one of %s", s, didYouMean(s, slices.Sorted(maps.Keys(flySizes))), strings.Join(slices.Sorted(maps.Keys(flySizes)), ", "))
			}
			f.Size = s
		}
	}
	if x, ok := t["memory"]; ok {
		if s, ok := d.str(p+".memory", x); ok {
			mb, err := MemoryMB(s)
			if err != nil {
				d.errorf(p+".memory", "%v", err)
			}
			f.MemoryMB = mb
		}
	}
}

// flyVM is the [[vm]] of fly.toml: a preset and its memory, chosen from
// [deploy.fly] and [limits], checked against Fly's rules.
type flyVM struct {
	Size     string
	MemoryMB int64
}

// flyMachine picks the VM: [deploy.fly] size, else the smallest shared
// preset with at least limits.cpu CPUs; memory from [deploy.fly] memory,
// else limits.memory, else the larger of the preset's and 1024 MB. It
// reports what Fly would reject instead of emitting it.
func flyMachine(c *Config) (flyVM, error) {
	size := c.Deploy.Fly.Size
	if size == "" {
		want := 1.0
		if c.Limits.CPU != "" {
			fmt.Sscan(c.Limits.CPU, &want)
		}
		for _, n := range []int{1, 2, 4, 8} {
			if float64(n) >= want {
				size = fmt.Sprintf("shared-cpu-%dx", n)
				break
			}
		}
		if size == "" {
			return flyVM{}, &keyError{"limits.cpu", fmt.Sprintf("%s CPUs: a shared Fly VM has at most 8; set [deploy.fly] size to a performance preset such as \"performance-16x\"", c.Limits.CPU)}
		}
	}
	preset := flySizes[size]
	mem, from := c.Deploy.Fly.MemoryMB, "deploy.fly.memory"
	if mem == 0 && c.Limits.Memory != "" {
		mem, _ = MemoryMB(c.Limits.Memory)
		from = "limits.memory"
	}
	if mem == 0 {
		mem, from = max(preset.MemoryMB, 1024), ""
		mem = min(mem, preset.MaxPerCPU*int64(preset.CPUs))
	}
	if from != "" {
		lo, hi := preset.MinPerCPU*int64(preset.CPUs), preset.MaxPerCPU*int64(preset.CPUs)
		switch {
		case mem%256 != 0:
			return flyVM{}, &keyError{from, fmt.Sprintf("Fly wants memory in steps of 256 MB, got %d MB: use %d or %d MB (or set [deploy.fly] memory)", mem, max(mem/256*256, 256), (mem/256+1)*256)}
		case mem < lo || mem > hi:
			return flyVM{}, &keyError{from, fmt.Sprintf("a Fly %s takes %d to %d MB of memory, got %d MB: change the memory or [deploy.fly] size", size, lo, hi, mem)}
		}
	}
	return flyVM{Size: size, MemoryMB: mem}, nil
}

// keptFly returns the app and primary_region of a fly.toml already in the
// output directory (what `fly launch` wrote), empty when absent.
func keptFly(prev []byte) (app, region string) {
	var f struct {
		App           string `toml:"app"`
		PrimaryRegion string `toml:"primary_region"`
	}
	if len(prev) == 0 || toml.NewDecoder(bytes.NewReader(prev)).Decode(&f) != nil {
		return "", ""
	}
	if !flyAppRE.MatchString(f.App) {
		f.App = ""
	}
	if !slices.Contains(flyRegions, f.PrimaryRegion) {
		f.PrimaryRegion = ""
	}
	return f.App, f.PrimaryRegion
}

// maxFlyKillTimeout is the largest kill_timeout Fly accepts, in seconds.
const maxFlyKillTimeout = 300

// FlyKillTimeout is fly.toml's kill_timeout: KillTimeout, at most the 300 s
// Fly accepts. capped reports that Fly will kill the box before its drain
// ends.
func FlyKillTimeout(c *Config) (secs int, capped bool) {
	k := KillTimeout(c)
	return min(k, maxFlyKillTimeout), k > maxFlyKillTimeout
}
