package protocol

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size units are powers of 1024, as in v1.
const (
	KB int64 = 1 << 10
	MB int64 = 1 << 20
	GB int64 = 1 << 30
)

// ParseSize parses a v1 size string: a non-negative decimal number, optional
// white space and an optional unit B, KB, MB or GB (case-insensitive,
// 1024-based). No unit means bytes. "1.5 kb" is 1536.
//
// Unlike v1, a string that does not parse is an error: v1 silently dropped
// the bound, so a typo such as "1MiB" made a rule match every size.
func ParseSize(s string) (int64, error) {
	v, err := ParseSizeExact(s)
	if err != nil {
		return 0, err
	}
	return int64(v), nil
}

// ParseSizeExact is ParseSize without rounding: "1.5B" is 1.5, so that a
// policy's bound compares with a size exactly as in v1 (a file of 1 byte is
// below "1.5B").
func ParseSizeExact(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("size %q is empty: want a number with an optional unit B, KB, MB or GB (e.g. \"512KB\")", s)
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult := int64(1)
	switch strings.ToUpper(unit) {
	case "", "B":
	case "KB":
		mult = KB
	case "MB":
		mult = MB
	case "GB":
		mult = GB
	default:
		return 0, fmt.Errorf("size %q has unit %q: want B, KB, MB or GB (1024-based)", s, unit)
	}
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, fmt.Errorf("size %q is not a number: want a number with an optional unit B, KB, MB or GB (e.g. \"1.5MB\")", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if err != nil {
		return 0, fmt.Errorf("size %q is not a number: %w", s, err)
	}
	v := f * float64(mult)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v, nil
}

// FormatSize renders n in the largest unit that divides it exactly, so that
// ParseSize(FormatSize(n)) == n.
func FormatSize(n int64) string {
	switch {
	case n != 0 && n%GB == 0:
		return strconv.FormatInt(n/GB, 10) + "GB"
	case n != 0 && n%MB == 0:
		return strconv.FormatInt(n/MB, 10) + "MB"
	case n != 0 && n%KB == 0:
		return strconv.FormatInt(n/KB, 10) + "KB"
	}
	return strconv.FormatInt(n, 10) + "B"
}
