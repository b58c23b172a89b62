package version

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamped", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3"},
		{"nothing known", "dev", nil, "dev"},
		{"go install of a release", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"a checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "(devel) 0123456789ab (modified)"},
		{"a pseudo-version names its commit", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101000000-0123456789ab"}, Settings: rev[:1]}, "v0.0.0-20260101000000-0123456789ab"},
	} {
		if got := From(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: From(%q) = %q, want %q", tc.name, tc.stamped, got, tc.want)
		}
	}
	if String("v7.0.0") != "v7.0.0" {
		t.Errorf("String(v7.0.0) = %q", String("v7.0.0"))
	}
}
