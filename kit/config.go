package kit

import (
	"log/slog"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// config is what boot read from the options and the manifest, and the
// sandbox it opened: nothing of it changes while the box serves.
type config struct {
	log    *slog.Logger
	mounts map[string]string // manifest fs key -> host path
	// realMounts are mounts with their symbolic links resolved at boot.
	realMounts map[string]string
	stateDir   string
	getenv     func(string) string
	machine    string // FLY_MACHINE_ID, when on Fly (see fly.go)
	baseEnv    []string
	sb         *sandbox.Sandbox // starts every session's agent processes
	degraded   bool             // the sandbox lacks a protection (isolation.go)

	maxMessage   int64
	maxInput     int64
	inputTimeout time.Duration
	timeout      time.Duration // 0: none
	diskLimit    int64         // limits.disk per session; 0: none
	maxSessions  int
	maxQueue     int
	resumeGrace  time.Duration
	sharedDirs   bool
	pingInterval time.Duration
	runnerLinger time.Duration // how long an idle prompt runner waits (queue.go)
	maxConns     int           // limits.max_connections (listen.go)
	caps         []string      // the capabilities the kit announces
}
