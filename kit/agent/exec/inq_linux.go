package exec

import "golang.org/x/sys/unix"

// ioctlInq asks how many bytes a pipe holds.
const ioctlInq = unix.TIOCINQ
