//go:build linux && !amd64 && !arm64

package sandbox

// No filter is built for this architecture: the seccomp layer is
// reported off.
var seccompNative seccompArch

var seccompArchRefused []refusal
