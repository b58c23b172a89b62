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
	// made. Under cgroup v1, where the sandbox makes no cpuacct group, it
	// is the live processes' own times (and their waited-for children's)
	// from /proc: it forgets processes that have exited, so it may go
	// down. -1 where neither is known.
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
			return u, true
		}
	}
	var ticks int64
	for _, pid := range c.pids() {
		b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // gone since listed
		}
		// The command name (field 2) may hold spaces: fields count from
		// after its closing parenthesis, which is field 3 (state).
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		for _, k := range f[11:15] { // utime, stime, cutime, cstime
			n, _ := strconv.ParseInt(k, 10, 64)
			ticks += n
		}
	}
	u.CPU = time.Duration(ticks) * (time.Second / userHZ)
	return u, true
}

// userHZ is the unit of the times in /proc/PID/stat: 100 on every Linux
// the kit runs on.
const userHZ = 100
