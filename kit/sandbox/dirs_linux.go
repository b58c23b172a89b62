package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Session directories. Config.SessionRoots names the roots under which
// each session gets a directory of its own (the box's work, input and
// output mounts), or, with SharedDirs, which every session uses as they
// are. The sandbox holds each root open from New on, and makes, gives
// away and removes what is below it through that descriptor with
// openat2's RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS: whoever can write a
// root (an image's unprivileged user owns /work) cannot redirect the
// sandbox to another path by swapping a directory for a symbolic link.

// validID reports whether id can name a session's directory, cgroup and
// temporary directory: 1 to 128 letters, digits, '-' and '_'.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// beneath is how every path below a held directory is resolved: no
// escape by "..", an absolute path or a symbolic link, and no crossing
// into another mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens rel below the directory dirfd, as beneath says, with
// flags (O_CLOEXEC and O_NOFOLLOW are added).
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	return openat2(dirfd, rel, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: beneath})
}

// openat2 is openat2(2), tried again on EINTR and on EAGAIN (a rename
// raced the resolution).
func openat2(dirfd int, rel string, how *unix.OpenHow) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, rel, how)
		if !errors.Is(err, syscall.EINTR) && !errors.Is(err, syscall.EAGAIN) {
			return fd, err
		}
	}
}

// fdPath names the file an open descriptor refers to, for the calls that
// take a path (chmod, RemoveAll): /proc/self/fd/N resolves to that file
// itself, whatever has been renamed or swapped since it was opened.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// openRoots opens Config.SessionRoots ("" is a root the box has not).
func (sb *Sandbox) openRoots() error {
	for _, r := range sb.cfg.SessionRoots {
		fd := -1
		if r != "" {
			var err error
			fd, err = unix.Open(r, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				sb.closeRoots()
				return fmt.Errorf("sandbox: open the sessions' root %s: %w", r, err)
			}
		}
		sb.roots = append(sb.roots, fd)
	}
	return nil
}

func (sb *Sandbox) closeRoots() {
	for _, fd := range sb.roots {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	sb.roots = nil
}

// sessionDirs is what a session holds of its directories: their paths
// (as its processes see them; "" where the box has no such root) and a
// descriptor of each (-1 for none).
type sessionDirs struct {
	paths []string
	fds   []int
	// taken: the directory was there already (a session of the same id
	// that a killed kit left, or a persistent session kept across a
	// restart): what is in it is given to the session too (giveDirs).
	taken []bool
}

// list is the session's directories, without the roots the box has not.
func (d sessionDirs) list() []string {
	var out []string
	for _, p := range d.paths {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (d sessionDirs) close() {
	for _, fd := range d.fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// makeDirs makes session id's directory under each root (the roots
// themselves with SharedDirs), and holds each open. A directory of the
// same id left by a kit that was killed is taken over. On failure, what
// it made is removed.
func (sb *Sandbox) makeDirs(id string) (sessionDirs, error) {
	d := sessionDirs{paths: make([]string, len(sb.roots)), fds: make([]int, len(sb.roots)), taken: make([]bool, len(sb.roots))}
	for i := range d.fds {
		d.fds[i] = -1
	}
	fail := func(err error) (sessionDirs, error) {
		d.close()
		_ = sb.removeDirs(id)
		return sessionDirs{}, err
	}
	for i, root := range sb.roots {
		if root < 0 {
			continue
		}
		if sb.cfg.SharedDirs {
			fd, err := unix.Open(fdPath(root), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fail(fmt.Errorf("sandbox: %w", err))
			}
			d.paths[i], d.fds[i] = sb.cfg.SessionRoots[i], fd
			continue
		}
		err := unix.Mkdirat(root, id, 0o700)
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return fail(fmt.Errorf("sandbox: make the session's directory under %s: %w", sb.cfg.SessionRoots[i], err))
		}
		d.taken[i] = err != nil
		fd, err := openBeneath(root, id, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return fail(fmt.Errorf("sandbox: open the session's directory under %s: %w", sb.cfg.SessionRoots[i], err))
		}
		d.paths[i], d.fds[i] = filepath.Join(sb.cfg.SessionRoots[i], id), fd
	}
	return d, nil
}

// giveDirs gives the session's directories to uid (and gid): mode 0700,
// or, where a front reads and writes them through its group
// (Config.FrontGID), group FrontGID and mode 02770, so that what is made
// in them keeps that group.
func (sb *Sandbox) giveDirs(d sessionDirs, uid int) error {
	gid, mode := uid, uint32(0o700)
	if sb.cfg.FrontGID > 0 {
		gid, mode = sb.cfg.FrontGID, 0o2770
	}
	for i, fd := range d.fds {
		if fd < 0 {
			continue
		}
		if uid >= 0 {
			if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
				return fmt.Errorf("sandbox: give %s to the session: %w", d.paths[i], err)
			}
			if i < len(d.taken) && d.taken[i] {
				if err := giveContents(fd, d.paths[i], uid, gid, 0); err != nil {
					return fmt.Errorf("sandbox: give what %s holds to the session: %w", d.paths[i], err)
				}
			}
		}
		if err := unix.Chmod(fdPath(fd), mode); err != nil {
			return fmt.Errorf("sandbox: %s: %w", d.paths[i], err)
		}
	}
	return nil
}

// maxGiveDepth bounds how deep giveContents goes.
const maxGiveDepth = 256

// giveContents gives everything below the directory fd (named path) to
// uid and gid, through descriptors, following no symbolic link (a link
// itself is given, never its target). A regular file with more than one
// link is left as it is: its other name may be outside, and giving it
// would give that away too.
func giveContents(fd int, path string, uid, gid, depth int) error {
	if depth > maxGiveDepth {
		return fmt.Errorf("%s: more than %d directories deep", path, maxGiveDepth)
	}
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dfd), path)
	defer f.Close()
	for {
		names, rerr := f.Readdirnames(1024)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
				continue
			}
			if int(st.Uid) != uid || int(st.Gid) != gid {
				if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return fmt.Errorf("%s/%s: %w", path, name, err)
				}
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				sub, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				err = giveContents(sub, path+"/"+name, uid, gid, depth+1)
				unix.Close(sub)
				if err != nil {
					return err
				}
			}
		}
		if rerr != nil {
			return nil
		}
	}
}

// removeDirs removes the session's directories (not the roots, with
// SharedDirs), through the roots held open.
func (sb *Sandbox) removeDirs(id string) error {
	if sb.cfg.SharedDirs || !validID(id) {
		return nil
	}
	var first error
	for i, root := range sb.roots {
		if root < 0 {
			continue
		}
		// RemoveAll opens the parent by this path, then removes below it
		// with openat and unlinkat, never following a symbolic link.
		if err := os.RemoveAll(filepath.Join(fdPath(root), id)); err != nil && first == nil {
			first = fmt.Errorf("sandbox: remove the session's directory under %s: %w", sb.cfg.SessionRoots[i], err)
		}
	}
	return first
}

// clearDir empties the directory held by fd, not following symbolic
// links.
func clearDir(fd int) error {
	dir := fdPath(fd)
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	var first error
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// chownBeneath gives rel, below the directory dirfd, to uid and gid; rel
// is resolved as beneath says, and a last component that is a symbolic
// link is refused (RESOLVE_NO_SYMLINKS), not followed.
func chownBeneath(dirfd int, rel string, uid, gid int) error {
	fd, err := openBeneath(dirfd, rel, unix.O_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH)
}

// DiskUsed is the size of the session's files: its directories and its
// private temporary files: with a mount namespace its /tmp and /dev/shm
// (tmpfs, measured from outside through its supervisor's root), else its
// TMPDIR. In a front the monitor measures them, as root: files an agent
// made unreadable count too.
func (ss *Session) DiskUsed() (int64, error) {
	if ss.sb.mon != nil {
		return ss.sb.mon.usage(ss.id)
	}
	return ss.diskUsedHere(ss.SupervisorPid()), nil
}

// diskUsedHere is DiskUsed measured by this process; supPid is the
// session's supervisor's, 0 for none.
func (ss *Session) diskUsedHere(supPid int) int64 {
	var used int64
	seen := map[string]bool{}
	for i, p := range ss.held.paths {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		used += treeSizeFd(ss.held.fds[i])
	}
	if ss.held.fds == nil {
		for _, p := range ss.dirs {
			if !seen[p] {
				seen[p] = true
				used += treeSize(p)
			}
		}
	}
	if ss.tmp != "" {
		used += treeSize(filepath.Join(fdPath(ss.sb.tmpRoot), ss.id))
	}
	if ss.sb.cloneMask&syscall.CLONE_NEWNS != 0 && supPid > 0 {
		used += tmpfsUsed(supPid, "/tmp", "/dev/shm")
	}
	return used
}

// treeSizeFd is treeSize of the directory held by fd.
func treeSizeFd(fd int) int64 { return treeSize(fdPath(fd) + "/.") }

// treeSize adds up the sizes of the regular files under p, not following
// symbolic links. What cannot be read counts nothing.
func treeSize(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// tmpfsUsed adds up the bytes in use in the tmpfs mounts at paths of
// process pid's root (another mount namespace's, read from outside).
// What is not a tmpfs, or cannot be read, counts nothing.
func tmpfsUsed(pid int, paths ...string) int64 {
	var used int64
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	for _, p := range paths {
		var st unix.Statfs_t
		if err := unix.Statfs(root+p, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
			continue
		}
		used += int64(st.Blocks-st.Bfree) * st.Bsize
	}
	return used
}
