//go:build !linux

package sandbox

import "time"

// Usage is what a session's processes use, read from its cgroup.
type Usage struct {
	Memory int64
	CPU    time.Duration
	Procs  int
}

// Usage is never known: there are no cgroups here.
func (ss *Session) Usage() (Usage, bool) { return Usage{}, false }
