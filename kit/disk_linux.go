package kit

import (
	"strconv"

	"golang.org/x/sys/unix"
)

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
