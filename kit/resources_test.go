package kit

import (
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/inspect"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

func TestObserversSampleResources(t *testing.T) {
	var o observers
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o.sample(t0, sandbox.Usage{Memory: 10 << 20, CPU: time.Second, Procs: 3})
	o.sample(t0.Add(2*time.Second), sandbox.Usage{Memory: 30 << 20, CPU: 2 * time.Second, Procs: 5})
	o.sample(t0.Add(4*time.Second), sandbox.Usage{Memory: 20 << 20, CPU: -1, Procs: 1})
	got, peaks := o.resources()
	if len(got) != 3 {
		t.Fatalf("kept %d samples, want 3", len(got))
	}
	if got[0].CPU != -1 {
		t.Errorf("the first sample's CPU = %v, want -1 (no interval yet)", got[0].CPU)
	}
	if got[1].CPU != 0.5 || got[1].CPUSum != 2 {
		t.Errorf("the second sample = %+v, want half a core, 2 s in all", got[1])
	}
	if got[2].CPU != -1 {
		t.Errorf("a sample without CPU counted = %v, want -1", got[2].CPU)
	}
	if peaks != (inspect.ResourcePeaks{Memory: 30 << 20, Procs: 5, CPU: 2}) {
		t.Errorf("peaks = %+v, want 30 MiB, 5 processes, 2 s", peaks)
	}
	for i := range resourceKeep + 10 {
		o.sample(t0.Add(time.Duration(10+i)*time.Second), sandbox.Usage{Memory: 1, CPU: time.Duration(i) * time.Second, Procs: 1})
	}
	if got, _ := o.resources(); len(got) != resourceKeep || !got[len(got)-1].T.Equal(t0.Add(time.Duration(resourceKeep+19)*time.Second)) {
		t.Errorf("kept %d samples ending %v, want the latest %d", len(got), got[len(got)-1].T, resourceKeep)
	}
}
