package protocol

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration parses a duration as v1 writes them: a whole number and a
// unit s, m, h or d ("30s", "5m", "1h", "7d", case-insensitive, optional
// white space). Go's own forms ("1h30m", "1.5h", "250ms") are accepted too.
// Zero and negative durations are errors.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("duration %q is empty: want a number and a unit s, m, h or d (e.g. \"5m\")", s)
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i > 0 && i < len(t) {
		unit := strings.ToLower(strings.TrimSpace(t[i:]))
		var mult time.Duration
		switch unit {
		case "s":
			mult = time.Second
		case "m":
			mult = time.Minute
		case "h":
			mult = time.Hour
		case "d":
			mult = 24 * time.Hour
		}
		if mult != 0 {
			n, err := strconv.ParseInt(t[:i], 10, 64)
			if err != nil || n <= 0 || n > math.MaxInt64/int64(mult) {
				return 0, fmt.Errorf("duration %q is out of range: want a positive number of %s, e.g. \"30%s\"", s, map[string]string{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit], unit)
			}
			return time.Duration(n) * mult, nil
		}
	}
	d, err := time.ParseDuration(strings.ToLower(strings.ReplaceAll(t, " ", "")))
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number and a unit s, m, h or d (e.g. \"30s\", \"5m\", \"24h\")", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", s)
	}
	return d, nil
}

// FormatDuration renders d in the v1 form when it is a whole number of
// days, hours, minutes or seconds, and in Go's form otherwise.
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		d time.Duration
		s string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d > 0 && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.s
		}
	}
	return d.String()
}
