package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/egress"
)

func zeroSources() Sources {
	return Sources{
		Kit: "v1", Box: `a"b\c`, BoxVersion: "0.1.0",
		Sessions: func() (int, int, int) { return 2, 3, 1 },
		Parked:   func(context.Context) (int64, int64) { return 4, 40 },
		Uploads:  func() (int64, int64) { return 0, 0 },
		Egress:   func() egress.Stats { return egress.Stats{} },
		Audit:    func() egress.JournalStats { return egress.JournalStats{} },
	}
}

// TestText: the histogram's buckets are cumulative, outcomes are counted
// by name, label values are escaped, and the gauges are what the sources
// read.
func TestText(t *testing.T) {
	c := NewCounters()
	c.Prompt("complete", 3*time.Millisecond)
	c.Prompt("complete", 2*time.Second)
	c.Prompt("LimitError", time.Hour)
	c.SessionsTotal.Add(5)
	text := string((&Metrics{c: c, src: zeroSources()}).text(context.Background()))
	for _, want := range []string{
		`glovebox_build_info{kit_version="v1",box="a\"b\\c",box_version="0.1.0"} 1`,
		`glovebox_sessions_open 2`,
		`glovebox_queue_depth 3`,
		`glovebox_prompts_running 1`,
		`glovebox_sessions_total 5`,
		`glovebox_prompts_total{outcome="LimitError"} 1`,
		`glovebox_prompts_total{outcome="complete"} 2`,
		`glovebox_prompt_duration_seconds_bucket{le="0.005"} 1`,
		`glovebox_prompt_duration_seconds_bucket{le="2.5"} 2`,
		`glovebox_prompt_duration_seconds_bucket{le="1800"} 2`,
		`glovebox_prompt_duration_seconds_bucket{le="+Inf"} 3`,
		`glovebox_prompt_duration_seconds_count 3`,
		`glovebox_sandbox_limit_errors_total 1`,
		`glovebox_parked_files 4`,
		`glovebox_parked_bytes 40`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
}
