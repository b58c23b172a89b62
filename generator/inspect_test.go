package generator

import (
	"strings"
	"testing"
)

func TestParseInspect(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte("name = \"s\"\n[inspect]\nenabled = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Manifest("fp"); m.Inspect == nil || !m.Inspect.Enabled {
		t.Errorf("Manifest().Inspect = %+v, want enabled", m.Inspect)
	}
	c, err = Parse("glovebox.toml", []byte("name = \"s\"\n"))
	if err != nil || c.Manifest("fp").Inspect != nil {
		t.Errorf("without [inspect]: Inspect = %+v, %v; want none", c.Manifest("fp").Inspect, err)
	}
	for in, want := range map[string]string{
		"[inspect]\nenabled = \"yes\"\n": "glovebox.toml:2: inspect.enabled",
		"[inspect]\nport = 1\n":          "glovebox.toml:2: inspect.port",
	} {
		_, err := Parse("glovebox.toml", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error naming %q", in, err, want)
		}
	}
}
