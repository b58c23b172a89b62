package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// liveDescendants lists the live (not zombie) processes below pid, like
// descendants, from the kernel's lists of each thread's children
// (/proc/PID/task/TID/children): it reads the files of pid's descendants
// only, where descendants reads every process's on the machine (two
// milliseconds and more per command on a host with a hundred processes).
// Without those lists (a kernel built without CONFIG_PROC_CHILDREN) it is
// descendants. A child that starts while the lists are read may be
// missed, as a process that starts during descendants' scan may be:
// killDescendants reads again until it finds none.
func liveDescendants(pid int) []int {
	out, ok := childrenTree(pid)
	if !ok {
		return descendants(pid)
	}
	return out
}

// childrenTree walks the children lists down from pid; ok is false when
// pid's own cannot be read.
func childrenTree(pid int) (out []int, ok bool) {
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		dir := "/proc/" + strconv.Itoa(p) + "/task/"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			if p == pid {
				return nil, false
			}
			continue // gone meanwhile
		}
		for _, t := range tasks {
			b, err := readSmall(dir + t.Name() + "/children")
			if err != nil {
				if p == pid && os.IsNotExist(err) && t.Name() == strconv.Itoa(pid) {
					return nil, false
				}
				continue
			}
			for f := range bytes.FieldsSeq(b) {
				c, err := strconv.Atoi(string(f))
				if err != nil {
					continue
				}
				// A zombie has no children left (they went to the
				// subreaper) and cannot be killed: the reaper takes it.
				if !zombie(c) {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out, true
}

// zombie reports whether process pid is a zombie or gone.
func zombie(pid int) bool {
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	s := b[i+2]
	return s == 'Z' || s == 'X'
}

// finishNow reports a command's exit from the reaper itself, sparing it
// the wake-up of another thread, when finish would wait for nothing: in a
// pid namespace that the command left empty, with no other command
// running. Otherwise (something to end, which may take the grace period)
// it does nothing and reports false: finish does it on a goroutine.
func (s *sessionSupervisor) finishNow(id uint64, ws syscall.WaitStatus) bool {
	if !s.pidns {
		return false
	}
	s.cleanMu.Lock()
	s.mu.Lock()
	last := len(s.cmds) == len(s.aside)
	s.mu.Unlock()
	if !last || !emptied() {
		s.cleanMu.Unlock()
		return false
	}
	s.cleanMu.Unlock()
	send(&ctlMsg{Op: "exit", ID: id, Status: uint32(ws), Emptied: true})
	return true
}
