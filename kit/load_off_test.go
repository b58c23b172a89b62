//go:build !load

package kit

// leakSessions is how many sessions TestSessionsLeaveNothing opens: a
// quick run here, 1,000 under the load tag (load_test.go).
const leakSessions = 60
