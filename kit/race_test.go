//go:build race

package kit

// raceEnabled: the race detector makes every stack frame larger.
const raceEnabled = true
