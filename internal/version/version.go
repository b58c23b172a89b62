// Package version says which build of a Glovebox binary is running: the
// release stamped with -ldflags, else what Go recorded when it built it.
package version

import (
	"runtime/debug"
	"strings"
)

// String is stamped when a release was stamped (anything but "" and
// "dev"), else the module version and VCS revision Go recorded in the
// binary: "v1.2.3", "(devel) 0123abcd4567 (modified)"; "dev" when nothing
// is known.
func String(stamped string) string {
	bi, _ := debug.ReadBuildInfo()
	return From(stamped, bi)
}

// From is String with the build information given.
func From(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" && stamped != "dev" {
		return stamped
	}
	if bi == nil {
		return "dev"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if short := rev[:min(12, len(rev))]; short != "" && !strings.Contains(v, short) {
		v += " " + short
		if modified == "true" {
			v += " (modified)"
		}
	}
	return v
}
