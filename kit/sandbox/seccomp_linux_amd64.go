package sandbox

import "golang.org/x/sys/unix"

var seccompNative = seccompArch{audit: unix.AUDIT_ARCH_X86_64, x32: true}

// seccompArchRefused: x86's I/O port access.
var seccompArchRefused = []refusal{{nr: unix.SYS_IOPL}, {nr: unix.SYS_IOPERM}}
