//go:build unix && !linux

package exec

// ioctlInq asks how many bytes a pipe holds: FIONREAD, _IOR('f', 127,
// int) on the BSDs and macOS, which x/sys/unix does not name.
const ioctlInq = 0x4004667f
