package client

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	lowest := func(time.Duration) time.Duration { return 0 }
	highest := func(k time.Duration) time.Duration { return k - 1 }
	d := 250 * time.Millisecond
	var got []time.Duration
	for range 8 {
		got = append(got, d)
		if lo, hi := jitter(d, lowest), jitter(d, highest); lo != d/2 || hi != d {
			t.Errorf("jitter(%v) spans [%v, %v], want [%v, %v]", d, lo, hi, d/2, d)
		}
		d = nextDelay(d, 8*time.Second)
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delay %d = %v, want %v", i, got[i], want[i])
		}
	}
	if j := jitter(time.Nanosecond, highest); j != time.Nanosecond {
		t.Errorf("jitter(1ns) = %v", j)
	}
}
