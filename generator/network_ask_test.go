package generator

import (
	"strings"
	"testing"
)

// [network] ask and ask_timeout reach the manifest, checked strictly.
func TestNetworkAsk(t *testing.T) {
	c, err := Parse("glovebox.toml", []byte("name = \"s\"\n[network]\ndefault = \"deny\"\nask = true\nask_timeout = \"90s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Network.Ask || c.Network.AskTimeout != "90s" {
		t.Fatalf("network = %+v, want ask on with a 90s timeout", c.Network)
	}
	c, err = Parse("glovebox.toml", []byte("name = \"s\"\n[network]\nask = true\n"))
	if err != nil || !c.Network.Ask || c.Network.AskTimeout != "" {
		t.Fatalf("ask alone: %+v, %v", c.Network, err)
	}
	for _, tc := range []struct{ toml, want string }{
		{"ask = \"yes\"", "network.ask"},
		{"ask = true\nask_timeout = \"soon\"", "network.ask_timeout"},
		{"ask = true\nask_timeout = 60", "network.ask_timeout"},
		{"ask_timeout = \"60s\"", "set ask = true"},
		{"asks = true", `unknown key "asks"`},
	} {
		_, err := Parse("glovebox.toml", []byte("name = \"s\"\n[network]\n"+tc.toml+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.toml, err, tc.want)
		}
	}
}
