package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroups is where the kit makes session cgroups: one parent directory
// per hierarchy in use (v2: one; v1: memory, pids, cpu and, when mounted,
// freezer).
type cgroups struct {
	version string            // "v2" or "v1"
	parents map[string]string // controller ("" for v2) -> parent dir
}

// cgroup is one session's.
type cgroup struct {
	cg   *cgroups
	dirs map[string]string // controller -> dir
}

// findCgroups finds the hierarchies the kit may create cgroups in, below
// its own cgroup, and checks that it can.
func findCgroups() (*cgroups, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	if dir, ok := mounts["v2"]; ok {
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil {
			ctl := strings.Fields(string(b))
			if slices.Contains(ctl, "memory") && slices.Contains(ctl, "pids") {
				cg := &cgroups{version: "v2", parents: map[string]string{"": filepath.Join(dir, own[""], "glovebox")}}
				if err := cg.prepareV2(filepath.Join(dir, own[""])); err != nil {
					return nil, err
				}
				return cg, nil
			}
		}
	}
	cg := &cgroups{version: "v1", parents: map[string]string{}}
	for _, c := range []string{"memory", "pids", "cpu", "freezer"} {
		dir, ok := mounts[c]
		if !ok {
			if c == "memory" || c == "pids" {
				return nil, fmt.Errorf("no cgroup v2 with the memory and pids controllers, and no v1 %s controller", c)
			}
			continue
		}
		p := filepath.Join(dir, own[c], "glovebox")
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s: %w", c, err)
		}
		cg.parents[c] = p
	}
	return cg, nil
}

// prepareV2 makes a parent for session cgroups with the controllers
// enabled. A cgroup with processes cannot enable controllers for its
// children, so the kit first moves itself into a leaf of its own.
func (cg *cgroups) prepareV2(own string) error {
	enable := func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
	}
	if err := enable(own); err != nil {
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("cgroup v2: enable controllers in %s: %w", own, err)
		}
		leaf := filepath.Join(own, "kit")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return fmt.Errorf("cgroup v2: %w", err)
		}
		procs, _ := os.ReadFile(filepath.Join(own, "cgroup.procs"))
		for _, pid := range strings.Fields(string(procs)) {
			_ = os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0)
		}
		if err := enable(own); err != nil {
			return fmt.Errorf("cgroup v2: enable controllers in %s: %w", own, err)
		}
	}
	parent := cg.parents[""]
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	return enable(parent)
}

// ownCgroups reads the kit's cgroup paths: "" for v2, else by controller.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// cgroupMounts maps "v2" and each v1 controller to its mount point.
func cgroupMounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		switch fields[sep+1] {
		case "cgroup2":
			if _, ok := m["v2"]; !ok {
				m["v2"] = mp
			}
		case "cgroup":
			for _, o := range strings.Split(fields[sep+3], ",") {
				switch o {
				case "memory", "pids", "cpu", "freezer":
					m[o] = mp
				}
			}
		}
	}
	return m, sc.Err()
}

// create makes a session's cgroup with its limits.
func (cg *cgroups) create(name string, lim Limits) (*cgroup, error) {
	c := &cgroup{cg: cg, dirs: map[string]string{}}
	for ctl, parent := range cg.parents {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			c.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		c.dirs[ctl] = dir
	}
	var writes [][2]string
	if cg.version == "v2" {
		if lim.Memory > 0 {
			writes = append(writes, [2]string{"memory.max", strconv.FormatInt(lim.Memory, 10)}, [2]string{"memory.swap.max", "0"})
		}
		if lim.Pids > 0 {
			writes = append(writes, [2]string{"pids.max", strconv.Itoa(lim.Pids)})
		}
		if lim.CPU > 0 {
			writes = append(writes, [2]string{"cpu.max", fmt.Sprintf("%d 100000", int64(lim.CPU*100000))})
		}
	} else {
		if lim.Memory > 0 {
			writes = append(writes, [2]string{"memory/memory.limit_in_bytes", strconv.FormatInt(lim.Memory, 10)})
			if _, err := os.Stat(filepath.Join(c.dirs["memory"], "memory.memsw.limit_in_bytes")); err == nil {
				writes = append(writes, [2]string{"memory/memory.memsw.limit_in_bytes", strconv.FormatInt(lim.Memory, 10)})
			}
		}
		if lim.Pids > 0 {
			writes = append(writes, [2]string{"pids/pids.max", strconv.Itoa(lim.Pids)})
		}
		if lim.CPU > 0 && c.dirs["cpu"] != "" {
			writes = append(writes, [2]string{"cpu/cpu.cfs_period_us", "100000"}, [2]string{"cpu/cpu.cfs_quota_us", strconv.FormatInt(int64(lim.CPU*100000), 10)})
		}
	}
	for _, w := range writes {
		if err := os.WriteFile(c.file(w[0]), []byte(w[1]), 0); err != nil {
			c.remove()
			return nil, fmt.Errorf("set cgroup limit %s: %w", w[0], err)
		}
	}
	return c, nil
}

// file maps "ctl/file" (v1) or "file" (v2) to its path.
func (c *cgroup) file(name string) string {
	if c.cg.version == "v2" {
		return filepath.Join(c.dirs[""], name)
	}
	ctl, f, _ := strings.Cut(name, "/")
	return filepath.Join(c.dirs[ctl], f)
}

// add moves a process into the cgroup.
func (c *cgroup) add(pid int) error {
	for _, dir := range c.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// procsDir is the hierarchy whose cgroup.procs lists the session's
// processes.
func (c *cgroup) procsDir() string {
	if c.cg.version == "v2" {
		return c.dirs[""]
	}
	return c.dirs["pids"]
}

// pids lists the processes in the cgroup.
func (c *cgroup) pids() []int {
	b, err := os.ReadFile(filepath.Join(c.procsDir(), "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// kill ends every process in the cgroup and waits, for up to timeout,
// until none is left. It freezes the cgroup first where it can, so that
// nothing forks while it kills.
func (c *cgroup) kill(timeout time.Duration) {
	if c.cg.version == "v2" {
		if os.WriteFile(filepath.Join(c.dirs[""], "cgroup.kill"), []byte("1"), 0) == nil {
			c.waitEmpty(timeout)
			return
		}
	}
	freezer := c.dirs["freezer"]
	if freezer != "" {
		_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("FROZEN"), 0)
	}
	deadline := time.Now().Add(timeout)
	for {
		pids := c.pids()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if freezer != "" {
			_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("THAWED"), 0)
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
		if freezer != "" {
			_ = os.WriteFile(filepath.Join(freezer, "freezer.state"), []byte("FROZEN"), 0)
		}
	}
}

func (c *cgroup) waitEmpty(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for len(c.pids()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// remove deletes the cgroup's directories; the processes must be gone.
func (c *cgroup) remove() {
	for _, dir := range c.dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// events reads the counters of limits hit: OOM kills and refused forks.
func (c *cgroup) events() (oom, pidsMax int64) {
	if c.cg.version == "v2" {
		oom = counter(filepath.Join(c.dirs[""], "memory.events"), "oom_kill")
		pidsMax = counter(filepath.Join(c.dirs[""], "pids.events"), "max")
		return
	}
	oom = counter(filepath.Join(c.dirs["memory"], "memory.oom_control"), "oom_kill")
	pidsMax = counter(filepath.Join(c.dirs["pids"], "pids.events"), "max")
	return
}

// readSmall reads a small kernel file (a cgroup's counters, a pidfd's
// fdinfo) on every command's path: an open, a read or two and a close,
// where os.ReadFile adds a stat and registers the file with the poller
// (three fcntls and two epoll_ctls).
func readSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 1024)
	for {
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// counter reads "key N" from a flat-keyed cgroup file.
func counter(path, key string) int64 {
	b, err := readSmall(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
