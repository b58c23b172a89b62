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

	"golang.org/x/sys/unix"
)

// The supervisor's view of the file system: with a mount namespace, the
// image read-only, hidden paths covered, the session's directories bound
// writable, and a private /tmp, /dev/shm and /dev.

// setupMounts builds the sandbox's view of the file system in the mount
// namespace the supervisor was cloned into.
func setupMounts(m *mountSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Hold the directories to bind before anything covers them.
	fds := make([]int, len(m.Bind))
	for i, src := range m.Bind {
		fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", src, err)
		}
		fds[i] = fd
	}
	exposed := map[string]int{}
	for _, src := range m.Expose {
		if fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			exposed[src] = fd
		}
	}
	writable := map[string]bool{}
	if m.Dev {
		if err := setupDev(); err != nil {
			return err
		}
	}
	if err := mountTmps(m.Tmp, m.Dev, writable); err != nil {
		return err
	}
	if err := hideDirs(m.Hide); err != nil {
		return err
	}
	if err := bindDirs(m.Bind, fds, writable); err != nil {
		return err
	}
	if err := exposeDirs(exposed); err != nil {
		return err
	}
	if m.User != nil {
		if err := addUser(m.User); err != nil {
			return err
		}
	}
	if m.ReadOnly {
		if err := remountReadOnly(writable); err != nil {
			return err
		}
	}
	if m.Dev {
		// Nothing more is made in /dev: the devices, /dev/pts and
		// /dev/shm are mounts of their own and keep their flags.
		if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("make /dev read-only: %w", err)
		}
	}
	if m.Proc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
	}
	return nil
}

// mountTmps mounts a private tmpfs on each of tmps that is a directory
// (making /dev/shm in the new /dev when dev) and marks it writable.
func mountTmps(tmps []tmpMount, dev bool, writable map[string]bool) error {
	for _, t := range tmps {
		if dev && t.Path == "/dev/shm" {
			if err := os.Mkdir(t.Path, 0o755); err != nil {
				return fmt.Errorf("make %s: %w", t.Path, err)
			}
		}
		if st, err := os.Stat(t.Path); err != nil || !st.IsDir() {
			continue
		}
		opts := "mode=1777"
		if t.Size > 0 {
			opts += ",size=" + strconv.FormatInt(t.Size, 10)
		}
		if err := unix.Mount("tmpfs", t.Path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount a private %s: %w", t.Path, err)
		}
		writable[t.Path] = true
	}
	return nil
}

// hideDirs covers each directory of paths with an empty tmpfs, parents
// before their children.
func hideDirs(paths []string) error {
	hide := slices.Clone(paths)
	slices.Sort(hide)
	for _, p := range hide {
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			continue // gone already, under a private tmpfs
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=65536"); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	return nil
}

// bindDirs binds each directory fds holds (opened before anything covered
// it) on its path in dsts, and marks it writable.
func bindDirs(dsts []string, fds []int, writable map[string]bool) error {
	for i, dst := range dsts {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("make %s: %w", dst, err)
		}
		src := "/proc/self/fd/" + strconv.Itoa(fds[i])
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", dst, err)
		}
		unix.Close(fds[i])
		writable[dst] = true
	}
	return nil
}

// exposeDirs binds each directory of exposed (a path and the descriptor
// that held it) back on its path, read-only and without exec.
func exposeDirs(exposed map[string]int) error {
	for dst, fd := range exposed {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("make %s: %w", dst, err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("expose %s: %w", dst, err)
		}
		unix.Close(fd)
		if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("expose %s read-only: %w", dst, err)
		}
	}
	return nil
}

// devNodes are the devices a sandbox's /dev holds, bound from the
// image's: what programs open by name. Everything else (disks, the
// kernel's message buffer, /dev/mem, the host's ttys, fuse, kvm) is not
// there.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// setupDev covers /dev with a small tmpfs holding devNodes (bound from
// the devices the image's /dev has), a devpts instance of the namespace's
// own for pseudo-terminals, and the standard links. Devices the image
// lacks are left out; a kernel that refuses a private devpts leaves the
// sandbox without pseudo-terminals rather than with the host's.
func setupDev() error {
	// Hold the devices before the tmpfs covers them.
	nodes := map[string]int{}
	for _, n := range devNodes {
		fd, err := unix.Open("/dev/"+n, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
			unix.Close(fd)
			continue
		}
		nodes[n] = fd
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=65536"); err != nil {
		return fmt.Errorf("mount a private /dev: %w", err)
	}
	for _, n := range devNodes {
		fd, ok := nodes[n]
		if !ok {
			continue
		}
		dst := "/dev/" + n
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return fmt.Errorf("make %s: %w", dst, err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", dst, err)
		}
		unix.Close(fd)
	}
	if err := os.Mkdir("/dev/pts", 0o755); err != nil {
		return fmt.Errorf("make /dev/pts: %w", err)
	}
	if unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") == nil {
		if err := os.Symlink("pts/ptmx", "/dev/ptmx"); err != nil {
			return fmt.Errorf("link /dev/ptmx: %w", err)
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	return nil
}

// addUser binds copies of /etc/passwd and /etc/group with the session's
// user ("session") and group added over the image's, read-only. The copies
// live in the namespace's private /dev/shm (or /tmp), owned by root.
func addUser(u *userEntry) error {
	dir := ""
	for _, d := range []string{"/dev/shm", "/tmp"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			dir = d
			break
		}
	}
	if dir == "" {
		return nil
	}
	for _, f := range []struct{ path, line string }{
		{"/etc/passwd", fmt.Sprintf("session:x:%d:%d:glovebox session:%s:/bin/sh\n", u.UID, u.UID, u.Home)},
		{"/etc/group", fmt.Sprintf("session:x:%d:\n", u.UID)},
	} {
		st, err := os.Stat(f.path)
		if err != nil || !st.Mode().IsRegular() {
			continue // an image without one: nothing to add to
		}
		old, _ := os.ReadFile(f.path)
		if len(old) > 0 && old[len(old)-1] != '\n' {
			old = append(old, '\n')
		}
		cp := filepath.Join(dir, ".glovebox"+strings.ReplaceAll(f.path, "/", "-"))
		if err := os.WriteFile(cp, append(old, f.line...), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", cp, err)
		}
		if err := unix.Mount(cp, f.path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", f.path, err)
		}
		if err := unix.Mount("", f.path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", f.path, err)
		}
	}
	return nil
}

// remountReadOnly makes every mount read-only but the writable ones and
// those under /proc and /dev, keeping each mount's other flags.
func remountReadOnly(writable map[string]bool) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		points = append(points, unescapeMount(fields[4]))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read mountinfo: %w", err)
	}
	for _, mp := range points {
		if writable[mp] || under(mp, "/proc") || under(mp, "/dev") {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(mp, &st); err != nil {
			continue // not reachable any more: covered by a hidden directory
		}
		flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
		for _, f := range [][2]int64{
			{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
			{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
			{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		} {
			if st.Flags&f[0] != 0 {
				flags |= uintptr(f[1])
			}
		}
		if err := unix.Mount("", mp, "", flags, ""); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("make %s read-only: %w", mp, err)
		}
	}
	return nil
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
