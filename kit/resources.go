package kit

import (
	"time"

	"github.com/glovebox-dev/glovebox/kit/inspect"
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

// sample records a reading of the session's cgroup.
func (o *observers) sample(now time.Time, u sandbox.Usage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := inspect.ResourceSample{T: now.UTC(), Memory: u.Memory, Procs: u.Procs, CPU: -1}
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
func (o *observers) resources() ([]inspect.ResourceSample, inspect.ResourcePeaks) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]inspect.ResourceSample(nil), o.samples...), o.peaks
}

// sampleResources reads every live session's cgroup once.
func (l *live) sampleResources(now time.Time) {
	for _, ss := range l.all() {
		box := ss.obs.box.Load()
		if box == nil {
			continue
		}
		if u, ok := box.Usage(); ok {
			ss.obs.sample(now, u)
		}
	}
}

// resourceLoop samples the sessions until done closes. It runs only
// while the inspector is on.
func (l *live) resourceLoop(done <-chan struct{}) {
	defer l.wg.Done()
	t := time.NewTicker(resourceEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			l.sampleResources(now)
		}
	}
}

// startSampling starts the sampler, which runs until done closes; the
// kit starts it when the inspector is on.
func (l *live) startSampling(done <-chan struct{}) {
	l.wg.Add(1)
	go l.resourceLoop(done)
}
