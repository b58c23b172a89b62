//go:build !load

package kit

// leakSessions is how many sessions TestSessionsLeaveNothing opens,
// leakParallel of them at a time: a quick run here, 1,000 under the load
// tag (load_test.go).
const (
	leakSessions = 60
	leakParallel = 20
)
