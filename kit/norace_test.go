//go:build !race

package kit

const raceEnabled = false
