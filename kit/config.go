package kit

import (
	"log/slog"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
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
	maxTerminals int // per session (terminal.go)
	maxProcesses int // per session (processes.go)
	maxQueue     int
	resumeGrace  time.Duration
	pauseAfter   time.Duration // sessions.pause; 0: never
	persist      bool          // sessions.persist (persist.go)
	// restore: the persistent sessions the boot's reclaim kept, to be
	// restored (restoreSessions).
	restore      map[string]sessionRecord
	lifetime     time.Duration // sessions.lifetime; 0: none
	sharedDirs   bool
	pingInterval time.Duration
	runnerLinger time.Duration // how long an idle prompt runner waits (queue.go)
	parkAfter    time.Duration // how long a reader that handled a frame waits before parking (conn.go)
	maxConns     int           // limits.max_connections (listen.go)
	caps         []string      // the capabilities the kit announces
}

// readLimits reads the manifest's limits and session settings over the
// defaults (their syntax was checked by the manifest's Check).
func (c *config) readLimits(m *protocol.Manifest) {
	if v := m.Limits.MaxMessage; v != "" {
		if n, err := protocol.ParseSize(v); err == nil {
			c.maxMessage = n
		}
	}
	if v := m.Limits.MaxInput; v != "" {
		if n, err := protocol.ParseSize(v); err == nil {
			c.maxInput = n
		}
	}
	if v := m.Limits.InputTimeout; v != "" {
		if d, err := protocol.ParseDuration(v); err == nil {
			c.inputTimeout = d
		}
	}
	if v := m.Limits.Timeout; v != "" {
		if d, err := protocol.ParseDuration(v); err == nil {
			c.timeout = d
		}
	}
	c.pauseAfter = m.Sessions.PauseAfter()
	if ss := m.Sessions; ss != nil {
		if ss.Max > 0 {
			c.maxSessions = ss.Max
		}
		if ss.MaxQueue > 0 {
			c.maxQueue = ss.MaxQueue
		}
		if ss.ResumeGrace != "" {
			if d, err := protocol.ParseDuration(ss.ResumeGrace); err == nil {
				c.resumeGrace = d
			}
		}
		if ss.Lifetime != "" {
			if d, err := protocol.ParseDuration(ss.Lifetime); err == nil {
				c.lifetime = d
			}
		}
		c.sharedDirs = ss.SharedDirs
		c.persist = ss.Persist
		if ss.Persist && ss.ResumeGrace == "" {
			// A persistent session outlives redeploys: its client has
			// more than a minute to come back.
			c.resumeGrace = DefaultPersistGrace
		}
	}
	c.maxConns = m.Limits.MaxConnections
	if c.maxConns <= 0 {
		c.maxConns = defaultMaxConns(c.maxSessions)
	}
}
