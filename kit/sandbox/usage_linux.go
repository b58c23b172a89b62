package sandbox

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Usage is what a session's processes use, read from its cgroup.
type Usage struct {
	// Memory is the memory charged to the session, in bytes.
	Memory int64
	// CPU is the CPU time its processes have used since the cgroup was
	// made; -1 where the cgroup does not count it (v1 without cpuacct).
	CPU time.Duration
	// Procs counts its processes and threads.
	Procs int
}

// Usage reads the session's cgroup. It only reads: the inspector samples
// it while the session runs. ok is false when the session has no cgroup
// (no cgroup layer, nothing started yet, or closed).
func (ss *Session) Usage() (u Usage, ok bool) {
	if ss == nil {
		return Usage{}, false
	}
	ss.mu.Lock()
	c, closed := ss.cg, ss.closed
	ss.mu.Unlock()
	if c == nil || closed {
		return Usage{}, false
	}
	num := func(path string) (int64, bool) {
		b, err := readSmall(path)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	u.CPU = -1
	if c.cg.version == "v2" {
		mem, ok1 := num(filepath.Join(c.dirs[""], "memory.current"))
		procs, ok2 := num(filepath.Join(c.dirs[""], "pids.current"))
		if !ok1 || !ok2 {
			return Usage{}, false
		}
		u.Memory, u.Procs = mem, int(procs)
		if us := counter(filepath.Join(c.dirs[""], "cpu.stat"), "usage_usec"); us > 0 {
			u.CPU = time.Duration(us) * time.Microsecond
		}
		return u, true
	}
	mem, ok1 := num(filepath.Join(c.dirs["memory"], "memory.usage_in_bytes"))
	procs, ok2 := num(filepath.Join(c.dirs["pids"], "pids.current"))
	if !ok1 || !ok2 {
		return Usage{}, false
	}
	u.Memory, u.Procs = mem, int(procs)
	if d := c.dirs["cpu"]; d != "" {
		if ns, ok := num(filepath.Join(d, "cpuacct.usage")); ok {
			u.CPU = time.Duration(ns)
		}
	}
	return u, true
}
