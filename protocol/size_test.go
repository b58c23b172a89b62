package protocol_test

import (
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestParseSize covers every example of spec §1.5. v1 returned undefined or
// NaN for the bad ones and dropped the bound; here they are errors.
func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
	}{
		{" 1.5 kb ", 1536},
		{"1.5 kb", 1536},
		{"512", 512},
		{"0", 0},
		{"1B", 1},
		{"1b", 1},
		{"1KB", 1024},
		{"1kB", 1024},
		{"1MB", 1 << 20},
		{"1mb", 1 << 20},
		{"1 MB", 1 << 20},
		{"1GB", 1 << 30},
		{"256KB", 256 << 10},
		{"10MB", 10 << 20},
		{"1.", 1},
		{".5KB", 512},
		{"007", 7},
		{"1.5B", 1}, // fractional bytes round down; ParseSizeExact keeps 1.5 for storage.Pick
		{"0.1KB", 102},
		{"8388608GB", 8388608 << 30},
	}
	for _, tt := range tests {
		got, err := protocol.ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		wantMsg string
	}{
		{"1MiB", `size "1MiB" has unit "MiB": want B, KB, MB or GB (1024-based)`},
		{"1Gi", `size "1Gi" has unit "Gi"`},
		{"1TB", `size "1TB" has unit "TB"`},
		{"1e3", `size "1e3" has unit "e3"`},
		{"-1", `size "-1" has unit "-1"`},
		{"+1", `size "+1" has unit "+1"`},
		{" ", `size " " is empty`},
		{"", `size "" is empty`},
		{"1.2.3", `size "1.2.3" is not a number`},
		{".", `size "." is not a number`},
		{"MB", `size "MB" is not a number`},
		{"1 K B", `size "1 K B" has unit "K B"`},
		{"1MB extra", `size "1MB extra" has unit "MB extra"`},
		{"Infinity", `size "Infinity" has unit "Infinity"`},
		{"NaN", `size "NaN" has unit "NaN"`},
		{"0x10", `size "0x10" has unit "x10"`},
		{"1_000", `size "1_000" has unit "_000"`},
		{"99999999999GB", `size "99999999999GB" is too large`},
		{strings.Repeat("9", 400), "is too large"},
	}
	for _, tt := range tests {
		got, err := protocol.ParseSize(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ParseSize(%q) = %d, %v, want an error containing %q", tt.in, got, err, tt.wantMsg)
		}
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1023, "1023B"},
		{1024, "1KB"},
		{1536, "1536B"},
		{1 << 20, "1MB"},
		{3 << 20, "3MB"},
		{1<<20 + 1024, "1025KB"},
		{1 << 30, "1GB"},
		{5 << 40, "5120GB"},
	}
	for _, tt := range tests {
		got := protocol.FormatSize(tt.in)
		if got != tt.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := protocol.ParseSize(got); err != nil || back != tt.in {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v, want %d", tt.in, back, err, tt.in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"5m", 5 * time.Minute},
		{"1h", time.Hour},
		{"24h", 24 * time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"10S", 10 * time.Second},
		{"2D", 48 * time.Hour},
		{"5 m", 5 * time.Minute},
		{" 1h ", time.Hour},
		{"1h30m", 90 * time.Minute},
		{"1.5h", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"1H30M", 90 * time.Minute},
		{"1 h 30 m", 90 * time.Minute},
		{"1m0s", time.Minute},
		// The largest durations, in both forms: FormatDuration writes the
		// first, so both must parse.
		{"2562047h", 2562047 * time.Hour},
		{"2562047h0m", 2562047 * time.Hour},
		{"106751d", 106751 * 24 * time.Hour},
		{"9223372036s", 9223372036 * time.Second},
	}
	for _, tt := range tests {
		got, err := protocol.ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v, want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		wantMsg string
	}{
		{"", `duration "" is empty`},
		{"  ", `duration "  " is empty`},
		{"0s", `duration "0s" is out of range: want a positive number of seconds, e.g. "30s"`},
		{"0", `duration "0" must be positive`},
		{"-5m", `duration "-5m" must be positive`},
		{"5", `duration "5": want a number and a unit s, m, h or d`},
		{"1w", `duration "1w": want a number and a unit`},
		{"1.5d", `duration "1.5d": want a number and a unit`},
		{"h", `duration "h": want a number and a unit`},
		{"99999999999999999999d", `is out of range`},
		{"106752d", `duration "106752d" is out of range`},
		{"2562048h", `duration "2562048h" is out of range`},
		{"2562048h0m", `duration "2562048h0m": want a number and a unit`},
		{"1d2", `duration "1d2": want a number and a unit`},
	}
	for _, tt := range tests {
		got, err := protocol.ParseDuration(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("ParseDuration(%q) = %v, %v, want an error containing %q", tt.in, got, err, tt.wantMsg)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{time.Second, "1s"},
		{90 * time.Second, "90s"},
		{time.Minute, "1m"},
		{90 * time.Minute, "90m"},
		{time.Hour, "1h"},
		{24 * time.Hour, "1d"},
		{36 * time.Hour, "36h"},
		{1500 * time.Millisecond, "1.5s"},
		{time.Nanosecond, "1ns"},
	}
	for _, tt := range tests {
		got := protocol.FormatDuration(tt.in)
		if got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
		if back, err := protocol.ParseDuration(got); err != nil || back != tt.in {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v, want %v", tt.in, back, err, tt.in)
		}
	}
}
