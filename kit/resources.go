package kit

import (
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// Resources for the inspector: while the inspector is on, every session
// whose processes run in a cgroup has its memory, CPU and process count
// sampled every resourceEvery, the latest resourceKeep samples kept (ten
// minutes), and its peaks recorded in the history when it ends.
const (
	resourceEvery = 2 * time.Second
	resourceKeep  = 300
)

// resourceSample is one reading of a session's cgroup.
type resourceSample struct {
	T      time.Time `json:"t"`
	Memory int64     `json:"mem"`             // bytes
	CPU    float64   `json:"cpu"`             // cores used since the sample before (-1: not counted)
	Procs  int       `json:"procs"`           // processes and threads
	CPUSum float64   `json:"cpu_s,omitempty"` // seconds of CPU used in all
}

// resourcePeaks sums up a session's samples for its history record.
type resourcePeaks struct {
	Memory int64   `json:"mem"`
	Procs  int     `json:"procs"`
	CPU    float64 `json:"cpu_s"` // seconds of CPU used, as last sampled
}

// sample records a reading of the session's cgroup.
func (o *observers) sample(now time.Time, u sandbox.Usage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := resourceSample{T: now.UTC(), Memory: u.Memory, Procs: u.Procs, CPU: -1}
	if u.CPU >= 0 {
		s.CPUSum = u.CPU.Seconds()
		if o.lastCPU >= 0 && !o.lastSample.IsZero() && u.CPU >= o.lastCPU {
			if dt := now.Sub(o.lastSample); dt > 0 {
				s.CPU = float64(u.CPU-o.lastCPU) / float64(dt)
			}
		}
	}
	o.lastCPU, o.lastSample = u.CPU, now
	if len(o.samples) == resourceKeep {
		o.samples = append(o.samples[:0], o.samples[1:]...)
	}
	o.samples = append(o.samples, s)
	o.peaks.Memory = max(o.peaks.Memory, s.Memory)
	o.peaks.Procs = max(o.peaks.Procs, s.Procs)
	o.peaks.CPU = max(o.peaks.CPU, s.CPUSum)
}

// resources returns a copy of the samples kept and the peaks.
func (o *observers) resources() ([]resourceSample, resourcePeaks) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]resourceSample(nil), o.samples...), o.peaks
}

// sampleResources reads every live session's cgroup once.
func (in *inspector) sampleResources(now time.Time) {
	for _, ss := range in.live.all() {
		box := ss.obs.box.Load()
		if box == nil {
			continue
		}
		if u, ok := box.Usage(); ok {
			ss.obs.sample(now, u)
		}
	}
}

// resourceLoop samples the sessions until the server closes. It runs only
// while the inspector is on.
func (in *inspector) resourceLoop() {
	defer in.live.wg.Done()
	t := time.NewTicker(resourceEvery)
	defer t.Stop()
	for {
		select {
		case <-in.done:
			return
		case now := <-t.C:
			in.sampleResources(now)
		}
	}
}

// startResources starts the sampler when the inspector is on (in not
// nil).
func (in *inspector) startResources() {
	if in == nil {
		return
	}
	in.live.wg.Add(1)
	go in.resourceLoop()
}
