// Package platformtest runs the real kit under each deploy target's
// default security and attacks it through real client sessions: root in
// a VM (the kit on this machine, as Fly runs it), Docker's defaults,
// Kubernetes' Pod Security baseline and restricted levels, an arbitrary
// non-root uid (OpenShift) and uid 10001, and gbx dev as root and not.
// Each container is a runc bundle built from `runc spec` plus the
// platform's edits (platform_test.go); Docker's default seccomp profile
// is generated, not vendored (seccomp_test.go, testdata/seccomp).
//
// The matrix needs root, runc and busybox-static, and sits behind the
// build tag platforms (CI runs it):
//
//	go test -tags platforms -count=1 ./internal/platformtest
//
// The package holds tests only; attacker is the hostile program the
// tests run inside sessions.
package platformtest
