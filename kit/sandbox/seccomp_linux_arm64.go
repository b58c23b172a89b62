package sandbox

import "golang.org/x/sys/unix"

var seccompNative = seccompArch{audit: unix.AUDIT_ARCH_AARCH64}

var seccompArchRefused []refusal
